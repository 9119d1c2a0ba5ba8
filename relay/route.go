package relay

import (
	"encoding/json"

	"tally/api"
	"tally/internal/rendezvous"
)

// NodeSubject is the relay subject of one full node (replica): an edge
// sends a request there first when the request's affinity key (its
// voter's) ranks the node first.
func NodeSubject(cluster, replica string) string { return Subject(cluster) + "." + replica }

// affinityKey is what routes a request: a vote by its poll and its
// voter — the session token it came with, else the (first) vote's voter
// id, else its idempotency key — and a session request by its address.
// A client's retry (the same voter, the same key) through any edge so
// reaches the full node that took the vote; and a voter's change of mind
// reaches the node that counted their first vote, which moves the count
// from one option to the other in one step (a change counted at another
// node shows the voter twice until that node hears of it: docs/
// certification.md, "The live tally"). A vote request relayed as its body
// (tests, a request an edge did not decode) routes by the body's voter or
// key, or by its bytes where it does not decode (the full node refuses it
// the same wherever it lands). A proof request routes by its poll and
// leaf: any full node answers it alike.
func affinityKey(r Request) string {
	switch r.Kind {
	case KindSession, KindJoin:
		return "session\x00" + r.Sender.IP
	case KindProof:
		return "proof\x00" + r.Poll + "\x00" + string(r.Body)
	}
	if r.Sender.Token != "" {
		return r.Poll + "\x00t" + r.Sender.Token
	}
	if len(r.Votes) > 0 {
		return voteKey(r.Poll, r.Votes[0].Voter, r.Votes[0].Idem)
	}
	var b struct {
		api.Vote
		Votes []api.Vote `json:"votes"`
	}
	if json.Unmarshal(r.Body, &b) == nil {
		switch {
		case b.Idem != "" || b.Voter != "":
			return voteKey(r.Poll, b.Voter, b.Idem)
		case len(b.Votes) > 0:
			return voteKey(r.Poll, b.Votes[0].Voter, b.Votes[0].Idem)
		}
	}
	return r.Poll + "\x00" + string(r.Body)
}

// voteKey routes a vote by its voter id, or by its key without one.
func voteKey(poll, voter, idem string) string {
	if voter != "" {
		return poll + "\x00v" + voter
	}
	return poll + "\x00k" + idem
}

// routed is a part of a gathered batch that goes the same way.
type routed struct {
	route   []string // subjects, in the order they are tried
	key     string   // the first request's, which routes the part again (reroute)
	pending []*pending
}

// split cuts a gathered batch by the full node each request ranks first:
// the region's ready nodes by rank, then the other regions', then the
// shared queue group (candidates).
func (e *Edge) split(batch []*pending) []routed {
	region, others, _ := e.candidates()
	if len(region)+len(others) == 0 {
		return []routed{{route: []string{Subject(e.cfg.Cluster)}, key: batch[0].key, pending: batch}}
	}
	var out []routed
	index := map[string]int{} // first subject → its part
	for _, p := range batch {
		route := e.routeOf(p.key, region, others)
		i, ok := index[route[0]]
		if !ok {
			i, index[route[0]] = len(out), len(out)
			out = append(out, routed{route: route, key: p.key})
		}
		out[i].pending = append(out[i].pending, p)
	}
	return out
}

// routeOf is the subjects a request with key is sent to, in order: the
// full nodes of region by the key's rank, then those of others, then the
// shared queue group.
func (e *Edge) routeOf(key string, region, others []string) []string {
	order := append(rendezvous.Rank(key, region), rendezvous.Rank(key, others)...)
	route := make([]string, 0, len(order)+1)
	for _, n := range order {
		route = append(route, NodeSubject(e.cfg.Cluster, n))
	}
	return append(route, Subject(e.cfg.Cluster))
}

// reroute is the route of key as the full nodes to relay to are now.
func (e *Edge) reroute(key string) []string {
	region, others, _ := e.candidates()
	return e.routeOf(key, region, others)
}
