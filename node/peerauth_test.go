package node

import (
	"net/http"
	"testing"
	"time"
)

// Certification fetches a replica's ledger with the cluster credential,
// not the admin token: regions with different admin tokens certify, and a
// wrong credential is refused like a missing one.
func TestNodeToNodeCallsUseTheClusterCredential(t *testing.T) {
	nodes := startCluster(t, []string{"eu-west", "us-east"}, func(i int, c *Config) {
		c.AdminToken = []string{"admin-of-eu", "admin-of-us"}[i]
	})
	a, b := nodes[0], nodes[1]
	r := a.call(t, "POST", "/v1/polls", `{"id":"p","question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":60,"grace_s":0}`,
		"Authorization", "Bearer admin-of-eu")
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	havePoll(t, nodes, "p")
	a.castVote(t, "p", "a", "v1", "k1")
	b.castVote(t, "p", "b", "v2", "k2")
	agree(t, nodes, "p", map[string]int64{"a": 1, "b": 1})
	advanceAll(nodes, 70*time.Second)
	if v := certifiedEverywhere(t, nodes, "p"); v.Total != 2 {
		t.Fatalf("certified: %+v", v)
	}
	for name, h := range map[string][]string{
		"no credential":       nil,
		"a stranger's guess":  {PeerHeader, "0000"},
		"the admin token":     {PeerHeader, "admin-of-us"},
		"another's admin":     {"Authorization", "Bearer admin-of-eu"},
		"a key's base64 form": {PeerHeader, testGossipKey},
	} {
		if r := b.call(t, "GET", "/v1/polls/p/ledger", "", h...); r.status != http.StatusUnauthorized {
			t.Errorf("%s: %d", name, r.status)
		}
	}
	keys, _ := b.cfg.gossipKeys()
	if r := b.call(t, "GET", "/v1/polls/p/ledger", "", PeerHeader, peerTokens(keys)[0]); r.status != http.StatusOK {
		t.Errorf("the cluster credential: %d", r.status)
	}
}
