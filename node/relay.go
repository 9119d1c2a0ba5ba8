package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"tally/api"
	"tally/gossip"
	"tally/ingest"
	"tally/relay"
	"tally/state"
)

// startRelay starts this node's side of the edge tier's relay (package
// relay): at an edge the batcher that sends its clients' votes to the
// full nodes, at a full node of a cluster the server that answers the
// edges' batches. A single node (no gossip key) answers none: nothing
// reaches it from anyone else. It returns what stops it.
func (n *Node) startRelay() (stop func(), err error) {
	if n.edge != nil {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { n.edge.Run(ctx) })
		if n.gossip.Mesh().EmbeddedURL() != "" {
			wg.Go(func() { watchLeaf(ctx, n) })
		}
		return func() { cancel(); wg.Wait() }, nil
	}
	if len(n.peerTokens) == 0 && !n.cfg.InsecureGossip {
		return func() {}, nil
	}
	srv, err := relay.StartServer(relay.ServerConfig{
		Conn: n.gossip.Mesh().Conn(), Cluster: n.cfg.Cluster, Replica: n.replica, Region: n.cfg.Region, Ready: func() bool { return relayReady(n) },
		Seal: n.gossip.SealRelay, Open: n.gossip.OpenRelay, Handler: relayHandler{n}, Metrics: n.relayM, Logger: n.log,
	})
	if err != nil {
		return func() {}, fmt.Errorf("node: relay: %w", err)
	}
	return func() {
		if err := srv.Close(); err != nil {
			n.log.Warn("relay close", "err", err)
		}
	}, nil
}

// relayHandler answers a relayed request as the node answers its own
// clients: the same pipeline, the same refusal while it is not ready.
type relayHandler struct{ n *Node }

// Its refusals are counted in tally_votes_total as the node's own
// clients' are (refusals.go): the pipeline counts those it makes, and
// those made here before it (not ready, a body too large for this node)
// are counted here.
func (h relayHandler) Votes(poll string, reqs []relay.Request) []relay.Answer {
	out := make([]relay.Answer, len(reqs))
	if err := h.n.readyErr(); err != nil {
		for i := range out {
			out[i] = relay.ErrorAnswer(err)
			h.n.ingest.CountRefused(err, max(len(reqs[i].Votes), ingest.VotesIn(reqs[i].Body)))
		}
		return out
	}
	in := make([]ingest.Request, 0, len(reqs))
	at := make([]int, 0, len(reqs)) // in[j] is reqs[at[j]]
	for i, q := range reqs {
		if err := h.n.ingest.Fits(q.Body); err != nil {
			out[i] = relay.ErrorOf(err, h.n.log)
			h.n.ingest.CountRefused(err, 1)
			continue
		}
		in, at = append(in, ingest.Request{Votes: q.Votes, Body: q.Body, Sender: q.Sender}), append(at, i)
	}
	if len(in) == 0 {
		return out
	}
	for j, r := range h.n.ingest.VoteBatch(poll, in) {
		if r.Err != nil {
			out[at[j]] = relay.ErrorOf(r.Err, h.n.log)
			continue
		}
		out[at[j]] = relay.Answer{Vote: &r.Response}
	}
	return out
}

func (h relayHandler) Session(body []byte, s api.Sender) relay.Answer {
	if err := h.n.readyErr(); err != nil {
		return relay.ErrorAnswer(err)
	}
	v, err := h.n.ingest.Session(body, s)
	if err != nil {
		return relay.ErrorOf(err, h.n.log)
	}
	return relay.Answer{Session: &v}
}

// Participant checks a quiz join an edge relayed, as the node checks the
// joins of its own sockets; a node not ready counts no one.
func (h relayHandler) Participant(token, userAgent, ip string) (string, bool) {
	if h.n.readyErr() != nil {
		return "", false
	}
	return h.n.ingest.Participant(token, userAgent, ip)
}

// Proof answers a voter's proof an edge relayed (GET /v1/polls/{poll}/
// proofs/{leaf} at the edge) as the node answers its own clients.
func (h relayHandler) Proof(ctx context.Context, poll, leaf string) (int, []byte) {
	if err := h.n.readyErr(); err != nil {
		return relay.ErrorAnswer(err).JSON()
	}
	return h.n.certify.ProofAnswer(ctx, poll, leaf, false) // an edge relays no admin token: a hidden poll's proofs are not shown
}

// receiptsProtocol is the first cluster protocol whose full nodes read
// relay batches TRQ5: they answer proof requests, and votes with their
// receipts (TRA3). v0.5.0 speaks 2.
const receiptsProtocol = 3

// receiptsEverywhere is an edge's EdgeConfig.Receipts: whether every
// live full node it knows of announces cluster protocol 3 or later, so
// that any of them may get a TRQ5 batch (a full node of v0.5.0 would
// drop it as malformed, its clients told outcome_unknown). During a
// rolling upgrade from v0.5.0, votes through edges so get no receipt,
// and proofs through edges are refused 503, until the last full node
// runs this release; from then on every accepted vote gets one. A full
// node that rolls back closes the gate again once its metadata is heard.
func receiptsEverywhere(n *Node) func() bool {
	return func() bool { return allReadReceipts(n.gossip.Members()) }
}

// allReadReceipts reports whether every full node among members speaks
// receiptsProtocol or later.
func allReadReceipts(members []gossip.Member) bool {
	for _, m := range members {
		if m.Role == gossip.RoleFull && m.Protocol < receiptsProtocol {
			return false
		}
	}
	return true
}

// checkAtEdge is an edge's check of the votes it relays (EdgeConfig.
// CheckVotes): an option the poll does not have is refused at the edge,
// from its replicated definitions, as every full node would refuse it
// (the options of a poll never change). A poll the edge does not know
// yet, or a quiz question not shown yet by its clock (a full node says
// 404 and tells nothing of its options), goes to a full node to decide.
// A quiz answer's display name (in its normal form: api.DecodeVotes)
// that looks like another participant's among the names this edge knows
// (its own sockets' joins, the lobby reports it heard) is refused here
// too (state.Names.Check), for the voter the body names: the full node,
// which knows the token's voter and its own names, checks it again and
// keeps it.
func checkAtEdge(st *state.State, now func() time.Time) func(string, []api.Vote) error {
	return func(pollID string, votes []api.Vote) error {
		def, ok := st.Defs.Poll(pollID)
		if !ok || def.Withheld(now().UnixMilli()) {
			return nil
		}
		for i, v := range votes {
			if _, ok := def.OptionID(v.Option); !ok {
				return api.Errorf(http.StatusUnprocessableEntity, api.CodeInvalidOption, "vote %d: poll %q has no option %q", i, pollID, v.Option)
			}
			if v.Name != "" && def.Quiz != nil {
				if err := st.Names.Check(def.Quiz.Quiz, v.Voter, v.Name); errors.Is(err, state.ErrLookAlike) {
					return api.LookAlikeName(v.Name)
				}
			}
		}
		return nil
	}
}

// readyErr is the refusal of a request the node cannot answer yet.
func (n *Node) readyErr() *api.Error {
	if n.ready.Load() {
		return nil
	}
	e := api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "node is starting: %s", startingWhy(n))
	e.RetryAfter = time.Second
	return e
}

// fullNodes is the edge's view of the live full nodes, by replica: its
// own region's, then the others'.
func (n *Node) fullNodes() (region, others []string) {
	for _, m := range n.gossip.Members() {
		switch {
		case m.Role != gossip.RoleFull || m.Replica == "":
		case m.Region == n.cfg.Region:
			region = append(region, m.Replica)
		default:
			others = append(others, m.Replica)
		}
	}
	return region, others
}

// relayReady is what a full node announces to the edges (relay.Server's
// Ready): it takes new votes — replayed, caught up with the other
// replicas' ballots — and is not draining. Edges relay to it only then.
func relayReady(n *Node) bool {
	return n.ready.Load() && !n.draining.Load() && !n.catchingUp()
}

// How an edge keeps its NATS leaf connection on a full node that works.
const (
	// leafSilence: no full node heard for this long means the full node
	// the leaf is on froze or died (every other one is heard through it).
	leafSilence = 4 * relay.PresenceEvery
	// leafRetry is the least time after a move that found no one before
	// the next (it doubles, up to leafRetryMax): with no full node
	// reachable at all, the edge does not restart its server every beat.
	leafRetry, leafRetryMax = 2 * time.Second, 30 * time.Second
	// leafHome is how long a full node of the edge's region must have
	// been ready before the leaf moves back to it from another region's
	// (doubling, up to a minute, while a move home lands elsewhere).
	leafHome = 2 * time.Second
)

// watchLeaf keeps an edge's NATS leaf connection — everything it relays
// and hears goes over it — on a full node that answers: when the edge
// has heard no full node for leafSilence, the one the leaf is on froze
// or died, and the leaf moves (gossip.Mesh.MoveLeaf: a fresh embedded
// server, that node tried last), long before NATS's pings would notice
// and without its 30 s loop-detection delay. While the leaf is on
// another region's full node and one of the edge's own is ready (it
// started before its region's, or failed over), it moves home. Every move
// is in the log and in tally_relay_leaf_moves_total.
func watchLeaf(ctx context.Context, n *Node) {
	mesh := n.gossip.Mesh()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	var (
		lastHub   string        // the full node the leaf was on last
		seenHub   string        // the one it was on at the last look ("": none)
		moved     time.Time     // the last move
		gap       time.Duration // the least time from the last move to a move for silence
		homeSince time.Time     // since when a full node of the region is ready
		homeGap   = leafHome
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		hub := mesh.LeafHub()
		if hub != seenHub {
			seenHub = hub
			n.edge.LinkMoved() // the batches sent over the old link are lost
		}
		if hub != "" {
			lastHub = hub
		}
		silent := n.edge.Silent()
		if silent < now.Sub(moved) {
			gap = 0 // heard from someone since the last move
		}
		if silent >= leafSilence && now.Sub(moved) >= gap {
			n.log.Warn("edge: no full node heard for "+silent.Round(time.Millisecond).String()+"; moving the NATS leaf connection off "+cmp.Or(lastHub, "(none)"),
				"hub", lastHub, "silent", silent.Round(time.Millisecond))
			to := mesh.MoveLeaf(ctx, lastHub)
			n.relayM.LeafMoved("silent")
			n.log.Info("edge: the NATS leaf connection is on "+cmp.Or(to, "no full node yet"), "hub", to, "hub_region", regionOf(n, to))
			moved, homeSince = time.Now(), time.Time{}
			gap = min(max(2*gap, leafRetry), leafRetryMax)
			continue
		}
		hubRegion := regionOf(n, hub)
		targets := n.edge.Targets()
		if hub == "" || hubRegion == "" || hubRegion == n.cfg.Region || len(targets) == 0 || targets[0].Region != n.cfg.Region {
			homeSince = time.Time{}
			continue
		}
		if homeSince.IsZero() {
			homeSince = now
		}
		if now.Sub(homeSince) < homeGap || now.Sub(moved) < leafHome {
			continue
		}
		n.log.Info("edge: a full node of region "+n.cfg.Region+" is ready; moving the NATS leaf connection home from "+hub+" (region "+hubRegion+")",
			"hub", hub, "hub_region", hubRegion, "ready", targets[0].Replica)
		to := mesh.MoveLeaf(ctx, "")
		n.relayM.LeafMoved("home")
		moved, homeSince, gap = time.Now(), time.Time{}, 0
		if regionOf(n, to) == n.cfg.Region {
			homeGap = leafHome
			continue
		}
		homeGap = min(2*homeGap, time.Minute)
		n.log.Warn("edge: the NATS leaf connection did not land home; trying again in "+homeGap.String(), "hub", to, "hub_region", regionOf(n, to))
	}
}

// regionOf is the region of the member named name, "" when unknown.
func regionOf(n *Node, name string) string {
	if name == "" {
		return ""
	}
	for _, m := range n.gossip.Members() {
		if m.Name == name {
			return m.Region
		}
	}
	return ""
}
