package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
		done := make(chan struct{})
		go func() {
			defer close(done)
			n.edge.Run(ctx)
		}()
		return func() { cancel(); <-done }, nil
	}
	if len(n.peerTokens) == 0 && !n.cfg.InsecureGossip {
		return func() {}, nil
	}
	srv, err := relay.StartServer(relay.ServerConfig{
		Conn: n.gossip.Mesh().Conn(), Cluster: n.cfg.Cluster, Replica: n.replica, Seal: n.gossip.SealRelay, Open: n.gossip.OpenRelay,
		Handler: relayHandler{n}, Metrics: n.relayM, Logger: n.log,
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
