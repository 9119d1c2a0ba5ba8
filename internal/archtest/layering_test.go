package archtest

import (
	"slices"
	"sort"
	"strings"
	"testing"
)

// may is DESIGN.md's room table as the code has it: the project's
// packages each one may import. An import that is not listed fails the
// test; an arrow upward means the piece belongs elsewhere. Packages not
// listed here (bench, tests' helpers, internal leaves) import what they
// need of the project except the rooms that wire it (node, cmd/…).
var may = map[string][]string{
	"hlc":           {},
	"ids":           {},
	"names":         {},
	"internal/wire": {},
	"session":       {},
	"web":           {},
	"crdt":          {"hlc", "internal/wire"},
	"ledger":        {"hlc", "ids", "internal/wire"},
	"quiz":          {"ids"},
	"merkle":        {},
	"receipt":       {"ids", "ledger", "merkle"},
	"poll":          {"hlc", "ids", "quiz"},
	"trust":         {"ledger"},
	"api":           {"ids", "ledger", "names", "poll", "quiz", "receipt"},
	"state":         {"crdt", "hlc", "ids", "internal/wire", "ledger", "names", "poll"},
	"ingest":        {"api", "crdt", "hlc", "ids", "ledger", "poll", "quiz", "receipt", "session", "state", "trust"},
	"gossip":        {"api", "crdt", "hlc", "ids", "internal/rendezvous", "internal/wire", "poll", "state"},
	"fanout":        {"api", "crdt", "poll", "quiz", "state"},
	"admin":         {"api", "hlc", "ids", "ledger", "poll", "quiz", "state"},
	"certify":       {"api", "hlc", "ids", "internal/rendezvous", "ledger", "merkle", "poll", "quiz", "receipt", "state"},
	"relay":         {"api", "ids", "internal/rendezvous", "internal/wire", "receipt"},
	"buddy":         {"ids", "internal/rendezvous", "internal/wire", "ledger"},
	"client":        {"api", "poll", "quiz"},
	"join":          {"api", "ids", "poll", "state"},
	"qr":            {"api"},
	"cmd/node":      {"internal/buildinfo", "internal/flagerr", "node"},
	"cmd/tally": {"api", "client", "fleet", "ids", "internal/atomicfile", "internal/backup",
		"internal/buildinfo", "internal/flagerr", "ledger", "merkle", "poll", "quiz", "receipt", "trust"},
}

// wiring are the rooms only a binary or a test may import.
var wiring = []string{"node", "cmd/node", "cmd/tally"}

// noNetwork are the rooms that know nothing of HTTP, NATS or WebSocket.
var noNetwork = []string{"hlc", "crdt", "ledger", "poll", "quiz", "ids", "names", "internal/wire", "merkle", "receipt"}

var networkImports = []string{"net/http", "github.com/nats-io/", "github.com/coder/websocket", "github.com/hashicorp/memberlist"}

func TestImportsPointDown(t *testing.T) {
	_, pkgs := parseTree(t)
	seen := map[string]bool{}
	for _, k := range pkgs {
		seen[k.dir] = true
		allowed, listed := may[k.dir]
		for im, file := range k.imports() {
			switch {
			case listed && !slices.Contains(allowed, im):
				t.Errorf("%s imports %s, which DESIGN.md's room table does not let %s import (archtest's may)", file, im, k.dir)
			case !listed && slices.Contains(wiring, im) && !strings.HasPrefix(k.dir, "cmd/"):
				t.Errorf("%s imports %s, a room only a binary wires", file, im)
			}
		}
		if slices.Contains(noNetwork, k.dir) {
			for im, file := range k.otherImports() {
				for _, n := range networkImports {
					if strings.HasPrefix(im, n) {
						t.Errorf("%s imports %s: %s knows nothing of the network", file, im, k.dir)
					}
				}
			}
		}
	}
	var gone []string
	for dir := range may {
		if !seen[dir] {
			gone = append(gone, dir)
		}
	}
	sort.Strings(gone)
	if len(gone) > 0 {
		t.Errorf("archtest's may names packages that are not in the tree: %v", gone)
	}
}

// TestIngestGossipFanoutMeetOnlyInState is DESIGN.md's one named rule,
// kept even if may is edited carelessly.
func TestIngestGossipFanoutMeetOnlyInState(t *testing.T) {
	_, pkgs := parseTree(t)
	three := []string{"ingest", "gossip", "fanout"}
	for _, k := range pkgs {
		if !slices.Contains(three, k.dir) {
			continue
		}
		for im, file := range k.imports() {
			if slices.Contains(three, im) {
				t.Errorf("%s imports %s: ingest, gossip and fanout never import each other", file, im)
			}
		}
	}
}
