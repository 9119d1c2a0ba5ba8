package gossip

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/certify"
	"tally/crdt"
	"tally/hlc"
	"tally/internal/memstore"
	"tally/ledger"
	"tally/state"
)

// memStore keeps what a data directory keeps across a restart.
type memStore = memstore.Store

// TestRestartWithoutJoinFindsItsCluster is issue 44's first node: started
// without --join, it runs alone by design only while nothing it kept says
// otherwise. Back from a restart it is neither synced nor caught up while
// the members it kept do not answer, and it joins them itself once they do.
func TestRestartWithoutJoinFindsItsCluster(t *testing.T) {
	store := &memStore{}
	a := startMember(t, "a", "eu-west", nil, func(c *Config) { c.Store = store })
	if !a.Synced() || !a.CaughtUp() {
		t.Fatal("a first node without seeds and nothing kept is not alone by design")
	}
	b := startMember(t, "b", "us-east", []string{a.GossipAddr()}, nil)
	waitFor(t, 5*time.Second, "b kept by a", func() bool {
		for range store.MetaWithPrefix(memberPrefix + "b") {
			return true
		}
		return false
	})
	addr := a.GossipAddr()
	a.Close()
	b.Close()

	// b is gone: the restarted a knows it belongs to a cluster.
	a2 := startMember(t, "a", "eu-west", nil, func(c *Config) { c.Store = store; c.BindAddr = addr })
	if a2.Synced() || a2.CaughtUp() {
		t.Fatal("a restarted node that kept a member is synced before hearing from anyone")
	}
	a2.Close()

	// Nothing kept of members, but its state holds another replica's
	// records (state.LoadTallies): the same.
	st, _ := state.New(state.Config{Replica: "a-r"})
	p := testPoll("p")
	if _, err := st.Defs.PutPoll(p, hlc.Timestamp{Wall: 1, Replica: "a-r"}); err != nil {
		t.Fatal(err)
	}
	tally := crdt.NewTally()
	tally.AddRecords("ap-r", 7)
	if _, err := st.Merge("p", tally); err != nil {
		t.Fatal(err)
	}
	a3 := startMember(t, "a3", "eu-west", nil, func(c *Config) { c.State = st })
	if a3.Synced() || a3.CaughtUp() || !slicesEqual(a3.Unheard(), []string{"ap-r"}) {
		t.Fatalf("a node whose state knows of ap-r: synced %v, caught up %v, unheard %v", a3.Synced(), a3.CaughtUp(), a3.Unheard())
	}
	a3.Close()

	// b is back: the restarted a joins it by itself and syncs.
	b2 := startMember(t, "b", "us-east", nil, func(c *Config) { c.BindAddr = keptAddr(t, store, "b") })
	a4 := startMember(t, "a", "eu-west", nil, func(c *Config) { c.Store = store; c.BindAddr = addr })
	waitFor(t, 10*time.Second, "a rejoins b without seeds, and syncs", func() bool {
		return len(a4.Members()) == 2 && len(b2.Members()) == 2 && a4.Synced() && a4.CaughtUp()
	})
}

func slicesEqual(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// keptAddr is the gossip address kept in s for node name.
func keptAddr(t *testing.T, s *memStore, name string) string {
	b, _ := s.Get(memberPrefix + name)
	var m knownMember
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m.Addr
}

// TestShortCertificateIsRefused: a receiving node applies a reconciled
// certificate only when it covers every record the node knows of (issue
// 44): a short one is dropped and counted, the poll stays uncertified
// there, and a whole one is then taken.
func TestShortCertificateIsRefused(t *testing.T) {
	var a *member
	a = startMember(t, "a", "eu-west", nil, func(c *Config) {
		c.CheckCertificate = func(cert state.Certificate) error {
			known, err := a.st.KnownRecords(cert.Poll)
			if err != nil {
				return err
			}
			return certify.Covers(cert, known)
		}
	})
	a.create(t, testPoll("p"))
	tally := crdt.NewTally()
	tally.Add("us-1", "a", 3)
	tally.AddRecords("us-1", 3)
	tally.Add("ap-1", "b", 2)
	tally.AddRecords("ap-1", 2)
	if _, err := a.st.Merge("p", tally); err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(nil)
	if err := a.st.Defs.LearnKey("us-1", pub); err != nil {
		t.Fatal(err)
	}
	ts := hlc.Timestamp{Wall: time.Now().UnixMilli(), Replica: "us-1"}
	cert := func(chains ...ledger.Chain) state.Certificate {
		raw, _ := json.Marshal(api.ResultDetail{Coordinator: "node-us", Result: &ledger.Result{Poll: "p", Replicas: chains, Digest: "d"}})
		c := state.Certificate{Poll: "p", Status: state.Reconciled, TS: ts, By: "us-1", Total: 3, Digest: "d", Detail: raw}
		c.Sig = ed25519.Sign(priv, c.SigningBytes())
		return c
	}
	d := &delegate{g: a.Gossip}
	sent := ts
	send := func(c state.Certificate) {
		sent.Logical++
		b, err := Encode(&Message{Kind: KindFull, Replica: "member", Region: "r", Sent: sent, Polls: []PollUpdate{{ID: "p", Cert: &c}}})
		if err != nil {
			t.Fatal(err)
		}
		d.MergeRemoteState(a.keys.seal(b), false)
	}
	send(cert(ledger.Chain{Poll: "p", Replica: "us-1", Records: 3})) // ap-1's two records left out
	if got := counter(t, a, "dropped", pathPushPull, "short_certificate"); got != 1 {
		t.Fatalf("short certificates dropped: %v", got)
	}
	if c, ok := a.st.Defs.Certificate("p"); ok {
		t.Fatalf("a short certificate was applied: %+v", c)
	}
	send(cert(ledger.Chain{Poll: "p", Replica: "us-1", Records: 3}, ledger.Chain{Poll: "p", Replica: "ap-1", Records: 2}))
	if c, ok := a.st.Defs.Certificate("p"); !ok || c.Status != state.Reconciled {
		t.Fatalf("the whole certificate: %+v %v", c, ok)
	}
}

// TestDamagedKeptMemberIsSkipped: a kept member that does not decode, or
// names no address, is skipped with a warning; the node starts alone by
// design, as it would with nothing kept.
func TestDamagedKeptMemberIsSkipped(t *testing.T) {
	store := &memStore{}
	store.PutMeta(memberPrefix+"x", []byte("{not json"))
	store.PutMeta(memberPrefix+"y", []byte(`{"addr":"","replica":"y-r"}`))
	store.PutMeta(memberPrefix+"z", nil)
	a := startMember(t, "a", "eu-west", nil, func(c *Config) { c.Store = store })
	if !a.Synced() || !a.CaughtUp() || len(a.known.keptAddrs()) != 0 {
		t.Fatalf("synced %v, caught up %v, kept %v", a.Synced(), a.CaughtUp(), a.known.keptAddrs())
	}
}

// TestKeylessNodeKeepsNoMembers: a single node (no key) never believes
// kept members or other replicas make it part of a cluster: it merges
// nothing from anyone, whatever its data dir says.
func TestKeylessNodeKeepsNoMembers(t *testing.T) {
	store := &memStore{}
	store.PutMeta(memberPrefix+"b", []byte(`{"addr":"127.0.0.1:1","replica":"b-r","region":"us-east"}`))
	a := startMember(t, "a", "eu-west", nil, func(c *Config) { c.Store = store; c.Keys = nil })
	if !a.Synced() || !a.CaughtUp() || len(a.known.keptAddrs()) != 0 {
		t.Fatalf("a key-less single node waits for, or rejoins, a cluster it may not join: kept %v", a.known.keptAddrs())
	}
}
