package ingest

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
	"tally/poll"
	"tally/state"
	"tally/trust"
)

// stamp makes the ledger records of the new votes: each stamped by the
// hybrid clock, placed in the poll's window (a vote before the opening or
// after the grace refuses the request), scored for trust and, for a quiz
// answer, timed.
func (p *Pipeline) stamp(def *poll.Definition, votes []Vote, fresh []int, looks []state.VoteLook, c Client, addr string, now time.Time) ([]ledger.Record, error) {
	recs := make([]ledger.Record, len(fresh))
	ipHash := p.hashIP(c.IP)
	for j, i := range fresh {
		ts, err := p.stampAfter(votes[i], looks[i])
		if err != nil {
			return nil, err
		}
		late := false
		window := def.WindowAt(ts.Wall)
		if window != poll.BeforeOpen && isFenced(p, def) {
			window = poll.AfterGrace // certification read this node's records of it
		}
		switch window {
		case poll.BeforeOpen:
			return nil, api.Errorf(http.StatusConflict, api.CodePollNotOpen, "poll %q opens at %s", def.ID, time.UnixMilli(def.OpensAt).UTC().Format(time.RFC3339))
		case poll.AfterGrace:
			if ts.Wall < poll.AddMs(def.GraceEnd(), ballotsHorizon.Milliseconds()) && p.cfg.State.BallotsMissing(def.ID, p.cfg.Ledger.Replica()) {
				// The key may be one another region took and this node has
				// not heard of yet: "closed" would tell its voter a counted
				// vote was refused.
				return nil, &api.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable, RetryAfter: time.Second,
					Message: fmt.Sprintf("poll %q is closed and this node is still receiving its votes from the other regions: send the same request again to learn whether this key was counted", def.ID)}
			}
			if def.Quiz != nil {
				return nil, api.Errorf(http.StatusConflict, api.CodeTooLate, "question %q closed at %s", def.ID, time.UnixMilli(def.ClosesAt).UTC().Format(time.RFC3339))
			}
			return nil, api.Errorf(http.StatusConflict, api.CodePollClosed, "poll %q closed at %s", def.ID, time.UnixMilli(def.ClosesAt).UTC().Format(time.RFC3339))
		case poll.InGrace:
			late = true
		}
		perMin, ipVoters := p.tracker.observe(addr, votes[i].Voter, now)
		sig := trust.Signals{IPVotesPerMin: perMin, IPVoters: ipVoters, TokenAge: c.TokenAge, SocketAge: c.SocketAge,
			Datacenter: p.datacenters.contains(c.IP), OverBudget: p.sessions.overBudget(c.TokenSlot, def.Quiz != nil)}
		if l := looks[i]; l.HasCounted && ts.Wall > l.CountedWall {
			sig.SincePrevious = time.Duration(ts.Wall-l.CountedWall) * time.Millisecond
		}
		score := trust.Score(sig)
		p.m.trust.Observe(score)
		if score < p.cfg.TrustFloor && !late {
			p.m.shadowed.Inc()
		}
		recs[j] = ledger.Record{
			Poll: def.ID, Voter: votes[i].Voter, Option: votes[i].Option, Idem: votes[i].Idem,
			Wall: ts.Wall, Logical: ts.Logical, Trust: score,
			Counted: !late && score >= p.cfg.TrustFloor, Late: late, IPHash: ipHash,
			Signals: sig.Ledger(),
		}
		if q := def.Quiz; q != nil {
			// Timed on this node's own clock, as the frame's time was: not
			// the hybrid clock, which a peer's faster clock can push ahead.
			received := c.ReceivedMs
			if received <= 0 {
				received = p.cfg.Now().UnixMilli()
			}
			recs[j].Answer = p.answer(def.ID, def.OpensAt, q, votes[i], looks[i].Voter, received, c)
		}
	}
	return recs, nil
}

// ballotsHorizon is how long after a poll's grace the node waits for the
// other replicas' ballots before it answers a key it does not know
// poll_closed: ballots arrive within a second, or through the catch-up
// within a few; those still missing after it were lost with their node's
// ledger (a restore from an older backup) and never arrive.
const ballotsHorizon = 30 * time.Second

// MaxStampAhead bounds how far ahead of this node's clock a client's
// "after" stamp may be: the regions' clocks, on NTP, differ by
// milliseconds. A vote stamped after it is stamped that far ahead, and a
// close "now" at this node comes after it (admin), so the bound is also
// how much later a client can make a close take effect.
const MaxStampAhead = time.Second

// stampAfter stamps a new vote after the voter's latest vote this node
// knows of, from any region, and after the stamp the client sent with it
// (the newest it was answered): a change of mind orders after the vote it
// replaces whatever the two regions' clocks say. A client's stamp beyond
// the clock's skew bound refuses the request; a known ballot that far
// ahead is passed over (the node's own ordering).
func (p *Pipeline) stampAfter(v Vote, look state.VoteLook) (hlc.Timestamp, error) {
	var known hlc.Timestamp
	if look.HasLatest {
		known = hlc.Timestamp{Wall: look.LatestWall, Logical: look.LatestLogical}
	}
	if w, l, ok := api.ParseStamp(v.After); ok && (w > known.Wall || w == known.Wall && l > known.Logical) {
		// (w and the clock are positive: the difference cannot wrap.)
		ahead := w - max(p.cfg.Now().UnixMilli(), p.cfg.Clock.Last().Wall)
		var ts hlc.Timestamp
		var err error
		if ahead <= MaxStampAhead.Milliseconds() {
			ts, err = p.cfg.Clock.NowAfter(hlc.Timestamp{Wall: w, Logical: l})
		}
		if ahead > MaxStampAhead.Milliseconds() || errors.Is(err, hlc.ErrSkew) {
			return hlc.Timestamp{}, api.Errorf(http.StatusBadRequest, api.CodeStampAhead,
				"after %q is %d ms ahead of this node's clock, more than the %s a region's clock may be: check the regions' clocks (NTP)", v.After, ahead, MaxStampAhead)
		}
		return ts, err
	}
	ts, err := p.cfg.Clock.NowAfter(known)
	if errors.Is(err, hlc.ErrSkew) {
		return p.cfg.Clock.Now()
	}
	return ts, err
}
