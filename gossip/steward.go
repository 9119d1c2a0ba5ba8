package gossip

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"iter"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"tally/ids"
	"tally/poll"
	"tally/state"
)

// A full node that is gone — killed with its disk, drained, replaced —
// must cost nothing visible (docs/certification.md, "A lost full node"):
//
//   - Its last ballots, those its own delta never carried, are held by its
//     buddy (the copies it took before each acknowledgement: package
//     buddy). The buddy sends them on in its own deltas once the replica
//     has left the membership, so every node knows those keys (a retry is
//     a duplicate with the certified id) and counts those votes live.
//   - A node catching up asks a replica's own subject for its ballots
//     (catchup.go); for a gone replica any full node that holds ballots of
//     it answers instead.
//   - Its counters stop moving: the live tally would keep a voter it
//     counted who voted again elsewhere. One live full node, its steward,
//     corrects them (state.Stewards) until the replica is back.
//
// "Gone" is "not a live member, as seen by a node that has merged a
// member's full state": a frozen node is gone once memberlist declares it
// dead, and back when it answers again; the steward then zeroes its
// correction and the replica's own counters, catching up on the ballots,
// take over. Everything here is idempotent: ballots are a set, the
// correction is recomputed from the ballots each time.

// stewardEvery is how often a full node looks for gone replicas.
const stewardEvery = 500 * time.Millisecond

// stewardAfter is how long a replica has been gone before its steward
// corrects its counters: its buddy sends on its last ballots, and the
// record count they make, at its first look (stewardEvery), and a
// correction made before they arrive would take out the voters it moved
// while their votes the buddy holds are not counted yet — the number on
// air would dip, then rise.
const stewardAfter = 1200 * time.Millisecond

// stewardLoop runs stewardOnce every stewardEvery until ctx ends.
func stewardLoop(ctx context.Context, g *Gossip) {
	defer g.wg.Done()
	t := time.NewTicker(stewardEvery)
	defer t.Stop()
	s := stewarding{sent: map[[2]string]uint64{}, hist: targets{}, goneSince: map[string]time.Time{}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			stewardOnce(g, &s, time.Now())
			s.hist.forget(time.Now())
		}
	}
}

// stewarding is what a node's steward loop keeps between looks.
type stewarding struct {
	sent      map[[2]string]uint64 // (poll, gone replica) → last Seq of its ballots this node sent on
	hist      targets
	goneSince map[string]time.Time // replica → when this node first saw it gone
}

// gone updates when each replica that took votes was first seen gone and
// reports whether replica has been gone stewardAfter.
func (s *stewarding) longGone(replica string, now time.Time) bool {
	since, ok := s.goneSince[replica]
	if !ok {
		s.goneSince[replica] = now
		return false
	}
	return now.Sub(since) >= stewardAfter
}

// holdLower is how long a steward keeps a higher target before it
// lowers its correction: a voter moved from the gone replica to another
// counts at the other once that one's counters reach a viewer, and a node
// or edge that missed its delta (an edge failing over its leaf) gets them
// within a refresh (HeartbeatEvery, 1 s). Lowering before could make the
// number on air dip; holding makes it count such a voter twice for as
// long, never once less.
const holdLower = 2 * time.Second

// targets is a steward's recent targets per (poll, gone replica).
type targets map[[2]string][]heldTarget

type heldTarget struct {
	at     time.Time
	target map[string]int64
}

// hold records target and returns, per option, the highest target of the
// last holdLower.
func (h targets) hold(key [2]string, target map[string]int64, now time.Time) map[string]int64 {
	h[key] = append(h[key], heldTarget{now, target})
	out := map[string]int64{}
	for _, t := range h[key] {
		if now.Sub(t.at) > holdLower {
			continue
		}
		for o, n := range t.target {
			out[o] = max(out[o], n)
		}
	}
	return out
}

// forget drops the targets older than holdLower.
func (h targets) forget(now time.Time) {
	for k, ts := range h {
		i := 0
		for i < len(ts) && now.Sub(ts[i].at) > holdLower {
			i++
		}
		if i == len(ts) {
			delete(h, k)
		} else {
			h[k] = ts[i:]
		}
	}
}

// liveFull returns the replicas of the live full members, this node's
// included, and whether this node's view of the membership can be
// trusted (it merged a member's full state).
func liveFull(g *Gossip) (map[string]bool, []string, bool) {
	live := map[string]bool{}
	var order []string
	for _, m := range g.Members() {
		if m.Role == RoleFull && m.Replica != "" {
			live[m.Replica] = true
			order = append(order, m.Replica)
		}
	}
	return live, order, g.synced.Load()
}

// stewardOnce sends on the held ballots of gone replicas and sets this
// node's corrections of their counters, poll by poll.
func stewardOnce(g *Gossip, s *stewarding, now time.Time) {
	live, full, trusted := liveFull(g)
	if !trusted {
		return
	}
	for r := range s.goneSince {
		if live[r] {
			delete(s.goneSince, r) // back
		}
	}
	for d, c := range gossipedCounts(g, g.cfg.Now().UnixMilli()) {
		records, have := c.records, c.have
		certified := false
		if c, ok := g.cfg.State.Defs.Certificate(d.ID); ok && c.Status == state.Reconciled {
			certified = true // the number shown is the certificate's: corrections stay as they are
		}
		for replica := range have {
			if _, ok := records[replica]; !ok {
				records[replica] = 0 // held of it, never announced (its buddy's copies)
			}
		}
		for replica, n := range records {
			if replica == g.cfg.Replica || live[replica] {
				continue
			}
			key := [2]string{d.ID, replica}
			sendOnHeld(g, s.sent, key, n, have[replica])
			if certified {
				continue
			}
			mine := stewardOf(d.ID, replica, full) == g.cfg.Replica && s.longGone(replica, now)
			if mine && ids.Valid(state.StewardID(replica, g.cfg.Replica)) != nil {
				mine = false // ids too long for a component: the live tally keeps its counters as they were
			}
			// Only with every ballot the cluster says it took: a partial
			// view would lower the tally and raise it again.
			complete := have[replica] >= n
			if mine && !complete {
				continue
			}
			var target map[string]int64
			if mine {
				var err error
				if target, err = g.cfg.State.Stewards().Contribution(d.ID, replica); err != nil {
					continue
				}
				target = s.hist.hold(key, target, now)
			}
			if changed, err := g.cfg.State.Stewards().Correct(d.ID, replica, target); err == nil && changed && mine {
				g.log.Debug("correcting the counters of a gone replica", "poll", d.ID, "replica", replica)
			}
		}
		// Corrections of replicas back in the membership, or no longer ours.
		for _, replica := range g.cfg.State.Stewards().Corrected(d.ID) {
			if live[replica] || stewardOf(d.ID, replica, full) != g.cfg.Replica {
				if changed, _ := g.cfg.State.Stewards().Correct(d.ID, replica, nil); changed {
					g.log.Info("no longer correcting the counters of a replica", "poll", d.ID, "replica", replica, "back", live[replica])
				}
			}
		}
	}
}

// sendOnHeld sends on, once, the ballots this node holds of gone replica
// key[1] beyond the n it announced (h held): its buddy's copies.
func sendOnHeld(g *Gossip, sent map[[2]string]uint64, key [2]string, n, h uint64) {
	from := max(n, sent[key])
	if h <= from {
		return
	}
	if last, err := g.cfg.State.Stewards().Republish(key[0], key[1], from, MaxBallots); err == nil && last > from {
		sent[key] = last
		g.m.republished.Add(float64(last - from))
		g.log.Info("sending on the ballots of a gone replica held as its buddy", "poll", key[0], "replica", key[1], "through_seq", last)
	}
}

// stewardOf is the live full member that corrects a gone replica's
// counters for a poll: the first of them by a rendezvous hash of (poll,
// gone replica, member), the same at every node that sees the same
// members.
func stewardOf(pollID, gone string, full []string) string {
	best, bestScore := "", uint64(0)
	for _, r := range full {
		h := sha256.Sum256([]byte(pollID + "\x00" + gone + "\x00" + r))
		if s := binary.BigEndian.Uint64(h[:8]); best == "" || s > bestScore || s == bestScore && r < best {
			best, bestScore = r, s
		}
	}
	return best
}

// serveGone answers a catch-up request sent to another replica's subject
// when that replica is not a live member: with the ballots of it this
// node holds after the Seq asked for, if it holds any (a node that holds
// none stays silent, so the asker takes the answer of one that does).
func (c *catchUp) serveGone(m *nats.Msg) {
	g := c.g
	replica := strings.TrimPrefix(m.Subject, c.subject(""))
	if replica == "" || replica == g.cfg.Replica || m.Reply == "" {
		return
	}
	if live, _, trusted := liveFull(g); !trusted || live[replica] {
		return // it answers for itself
	}
	if _, b, ok := c.answerFor(m.Data, replica); ok {
		if err := m.Respond(b); err == nil {
			g.m.bytes.WithLabelValues(pathCatchUp, "out").Add(float64(len(b)))
		}
	}
}

// pollCounts are, per replica, the records the cluster says it took in a
// poll and the ballots this node holds of it (every Seq up to have).
type pollCounts struct{ records, have map[string]uint64 }

// gossipedCounts yields every poll still gossiped with its pollCounts:
// what the catch-up and the steward compare.
func gossipedCounts(g *Gossip, nowMs int64) iter.Seq2[poll.Definition, pollCounts] {
	return func(yield func(poll.Definition, pollCounts) bool) {
		for _, d := range g.cfg.State.Defs.Polls() {
			if !g.gossiped(d, nowMs) {
				continue
			}
			t, err := g.cfg.State.Tally(d.ID)
			if err != nil {
				continue
			}
			have, err := g.cfg.State.BallotsHave(d.ID)
			if err != nil {
				continue
			}
			if !yield(d, pollCounts{t.RecordCounts(), have}) {
				return
			}
		}
	}
}
