package node

import (
	"errors"
	"fmt"
	"iter"
	"path/filepath"

	"github.com/nats-io/nats.go"

	"tally/buddy"
	"tally/crdt"
	"tally/gossip"
	"tally/ingest"
	"tally/ledger"
)

// buddyDir is the data dir's store of the other full nodes' copies.
const buddyDir = "buddy"

// copies is a full node's side of the two-copy rule (package buddy): the
// Sender its ledger copies its own batches through (with --ack-copies 2),
// and the Store of the copies it keeps for the other full nodes, served
// over NATS while it runs (any full node of a cluster may be chosen as a
// buddy, whatever its own --ack-copies).
type copies struct {
	acks   int           // copies an acknowledged vote is on: 1 or 2
	sender *buddy.Sender // with 2; nil with 1
	store  *buddy.Store  // at a full node of a cluster; nil at a single node or an edge
	server *buddy.Server // while the node runs
	m      *buddy.Metrics
}

// ackCopies is the --ack-copies in force: the flag, or its default, 2
// at a full node of a cluster and 1 at a single node (no gossip key),
// which has no second machine.
func (c *Config) ackCopies() int {
	if c.AckCopies != 0 {
		return c.AckCopies
	}
	if c.clustered() {
		return 2
	}
	return 1
}

// clustered says the node takes members: a gossip key, or the
// throwaway --insecure-gossip.
func (c *Config) clustered() bool {
	keys, _ := c.gossipKeys()
	return len(keys) > 0 || c.InsecureGossip
}

// checkAckCopies refuses an --ack-copies the node cannot keep.
func (c *Config) checkAckCopies() error {
	switch {
	case c.AckCopies < 0 || c.AckCopies > 2:
		return fmt.Errorf("%w: --ack-copies %d: want 1 or 2 (0: the default, 2 in a cluster)", ErrConfig, c.AckCopies)
	case c.AckCopies == 2 && !c.clustered():
		return fmt.Errorf("%w: --ack-copies 2: a single node (no --gossip-key) has no second machine to copy to: give the cluster's --gossip-key, or --ack-copies 1", ErrConfig)
	case c.AckCopiesDegrade && !c.clustered():
		return fmt.Errorf("%w: --ack-copies-degrade: a single node (no --gossip-key) keeps one copy anyway: give the cluster's --gossip-key, or drop the flag", ErrConfig)
	}
	return nil
}

// openCopies prepares n's copies before its ledger opens: the ledger
// takes the Sender as its Copier.
func openCopies(n *Node) error {
	c := &n.copies
	c.acks = n.cfg.ackCopies()
	if n.cfg.Role == gossip.RoleEdge || !n.cfg.clustered() {
		c.acks = 1 // an edge ledgers nothing; a single node copies to no one
		return nil
	}
	c.m = buddy.NewMetrics(n.reg)
	var err error
	if c.store, err = buddy.OpenStore(filepath.Join(n.cfg.DataDir, buddyDir), nil, n.log); err != nil {
		return fmt.Errorf("%w: --data-dir: %w", ErrDamaged, err)
	}
	if c.acks == 2 {
		// The replica's own key signs each copy's chain heads (the key it
		// announces and signs certificates with: openState learns it).
		key, err := signingKey(n.cfg.DataDir)
		if err != nil {
			return fmt.Errorf("node: signing key: %w", err)
		}
		c.sender = buddy.NewSender(buddy.SenderConfig{
			Key: key,
			// n.gossip and n.ledger are set once Open has made them; the
			// ledger copies nothing before Run takes votes.
			Conn: func() *nats.Conn {
				if n.gossip == nil {
					return nil
				}
				return n.gossip.Mesh().Conn()
			},
			Cluster: n.cfg.Cluster, Replica: n.replica,
			Buddies: func() []string { return buddy.Rank(n.replica, n.cfg.Region, fullMembers(n.gossip.Members())) },
			Scan: func(poll, replica string, after uint64) iter.Seq2[ledger.Record, error] {
				return n.ledger.ScanAfter(poll, replica, after)
			},
			Degrade: n.cfg.AckCopiesDegrade,
			Seal:    func(b []byte) []byte { return n.gossip.SealRelay(b) },
			Open:    func(b []byte) ([]byte, error) { return n.gossip.OpenRelay(b) },
			Metrics: c.m, Logger: n.log, Now: n.cfg.Now,
		})
	}
	return nil
}

// fullMembers is the live full nodes among members, as buddy.Rank
// takes them.
func fullMembers(members []gossip.Member) []buddy.Member {
	var out []buddy.Member
	for _, m := range members {
		if m.Role == gossip.RoleFull && m.Replica != "" {
			out = append(out, buddy.Member{Replica: m.Replica, Region: m.Region})
		}
	}
	return out
}

// startBuddy serves n's store of copies on its NATS connection. It
// returns what stops it.
func startBuddy(n *Node) (stop func(), err error) {
	c := &n.copies
	if c.store == nil {
		return func() {}, nil
	}
	c.server, err = buddy.Serve(buddy.ServerConfig{Conn: n.gossip.Mesh().Conn(), Cluster: n.cfg.Cluster, Replica: n.replica,
		Store: c.store, Seal: n.gossip.SealRelay, Open: n.gossip.OpenRelay, Metrics: c.m, Logger: n.log,
		KeyOf: n.state.Defs.PublicKey, Stored: heldCopies(n)})
	if err != nil {
		return func() {}, fmt.Errorf("node: buddy: %w", err)
	}
	return func() {
		if err := c.server.Close(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			n.log.Warn("buddy close", "err", err)
		}
	}, nil
}

// heldCopies returns what applies the ballots of a primary's records this node has
// just stored as its buddy, before the primary acknowledges them: the
// buddy that an edge fails over to already knows the keys (one key, one
// id, even when the primary dies before its gossip goes out). A poll this
// node does not hold yet is left to gossip's catch-up.
func heldCopies(n *Node) func(recs []ledger.Record) {
	return func(recs []ledger.Record) {
		for len(recs) > 0 {
			poll := recs[0].Poll
			bs := make([]crdt.Ballot, 0, len(recs))
			for len(recs) > 0 && recs[0].Poll == poll {
				r := &recs[0]
				bs = append(bs, ingest.BallotOf(r, n.state.Hash(r.Voter), n.state.Hash(r.Idem), n.cfg.TrustFloor))
				recs = recs[1:]
			}
			if _, _, err := n.state.MergeBallots(poll, bs); err != nil {
				n.log.Debug("buddy: a copy's ballots wait for gossip", "poll", poll, "err", err)
				continue
			}
			// Their record counts, stated by this node too: a primary lost
			// before its own delta went out took these votes all the same.
			last := map[string]uint64{}
			for _, b := range bs {
				last[b.Replica] = max(last[b.Replica], b.Seq)
			}
			for replica, seq := range last {
				if replica == n.replica {
					continue
				}
				if err := n.state.Stewards().Held(poll, replica, seq); err != nil {
					n.log.Debug("buddy: a copy's record count waits for gossip", "poll", poll, "replica", replica, "err", err)
				}
			}
		}
	}
}

// reapplyCopies applies, after the replay, the ballots of the copies n
// holds as a buddy of polls it holds: heldCopies applied them as they
// came, in memory only, and a primary destroyed since cannot send them
// again. Without it a restarted buddy would take a retry of such a key as
// new.
func reapplyCopies(n *Node) error {
	c := &n.copies
	if c.store == nil {
		return nil
	}
	polls, err := c.store.Polls()
	if err != nil {
		return fmt.Errorf("node: the buddy's copies: %w", err)
	}
	apply, total := heldCopies(n), 0
	for _, poll := range polls {
		if _, ok := n.state.Defs.Poll(poll); !ok {
			continue // gone past retention, or not heard of yet: nothing to answer
		}
		batch := make([]ledger.Record, 0, 1024)
		for r, err := range c.store.Scan(poll) {
			if err != nil {
				return fmt.Errorf("node: the buddy's copies of %s: %w", poll, err)
			}
			if batch = append(batch, r); len(batch) == cap(batch) {
				apply(batch)
				total, batch = total+len(batch), batch[:0]
			}
		}
		apply(batch)
		total += len(batch)
	}
	if total > 0 {
		n.log.Info("the ballots of the copies kept for other full nodes applied", "records", total)
	}
	return nil
}

// copyReady says a new vote may be taken: with two copies, only while a
// buddy is there (or --ack-copies-degrade).
func (c *copies) copyReady() bool { return c.sender == nil || c.sender.Ready() }

// closeStore closes the store of copies.
func (c *copies) closeStore() error {
	if c.store == nil {
		return nil
	}
	return c.store.Close()
}

// says is the banner's line on what an acknowledgement survives.
func (c *copies) says(cfg Config) string {
	switch {
	case c.acks == 2 && cfg.AckCopiesDegrade:
		return "a vote on this node and its buddy (--ack-copies 2); with no buddy, on this node only (--ack-copies-degrade)"
	case c.acks == 2:
		return "a vote on this node and its buddy (--ack-copies 2); with no buddy, new votes are refused (503 no_copy)"
	case cfg.clustered():
		return "a vote on this node only (--ack-copies 1): losing this machine loses what it acknowledged"
	default:
		return "a vote on this node only (a single node: --ack-copies 1)"
	}
}
