package state

import (
	"cmp"
	"slices"
	"time"

	"tally/ledger"
)

// Viewers are counted where they connect and summed across the cluster:
// each replica reports how many viewers of a poll it serves, the gossip
// spreads the reports, and a report not refreshed within ViewersFresh is
// no longer counted (its node went away or stopped serving the poll).

// ViewersFresh is how long another replica's report of its viewers counts.
const ViewersFresh = 10 * time.Second

// maxViewerReports bounds the replicas whose reports a poll keeps.
const maxViewerReports = 1024

// Audience is how many viewers each replica's sockets serve per poll, as
// reported (each replica's own count travels in gossip).
type Audience struct {
	replica string
	poll    func(id string) (*pollState, error)
}

type viewerCount struct {
	n    int64
	atMs int64 // when it was reported (this node's clock)
}

// Set records how many viewers of the poll this replica serves.
func (a *Audience) Set(pollID string, n int64, nowMs int64) {
	a.Merge(pollID, a.replica, n, nowMs)
}

// Merge records another replica's report of the viewers it serves,
// made at nowMs (the sender's time: a replayed old report changes
// nothing). Reports older than the one held, for unknown polls, negative
// counts and reports beyond maxViewerReports replicas a poll are ignored.
func (a *Audience) Merge(pollID, replica string, n int64, nowMs int64) {
	ps, err := a.poll(pollID)
	if err != nil || n < 0 {
		return
	}
	ps.vmu.Lock()
	defer ps.vmu.Unlock()
	if ps.viewers == nil {
		ps.viewers = map[string]viewerCount{}
	}
	cur, ok := ps.viewers[replica]
	if !ok && len(ps.viewers) >= maxViewerReports || ok && cur.atMs > nowMs {
		return
	}
	ps.viewers[replica] = viewerCount{n: n, atMs: nowMs}
}

// Own returns this replica's count of the poll's viewers, and
// whether it has reported one.
func (a *Audience) Own(pollID string) (int64, bool) {
	ps, err := a.poll(pollID)
	if err != nil {
		return 0, false
	}
	ps.vmu.Lock()
	defer ps.vmu.Unlock()
	c, ok := ps.viewers[a.replica]
	return c.n, ok
}

// Count returns the poll's viewers across the cluster at nowMs: this
// replica's own count and every other replica's fresh report.
func (a *Audience) Count(pollID string, nowMs int64) int64 {
	ps, err := a.poll(pollID)
	if err != nil {
		return 0
	}
	ps.vmu.Lock()
	defer ps.vmu.Unlock()
	var sum int64
	for r, c := range ps.viewers {
		if r == a.replica || nowMs-c.atMs <= ViewersFresh.Milliseconds() {
			sum += c.n
		}
	}
	return sum
}

// The newest participants of a quiz's lobby travel the same way: each
// replica reports the display names of the newest who joined at its
// sockets, with when they joined, and every node shows the newest of all
// fresh reports (the studio screen's names as they join).

// MaxJoiners bounds the names one report carries and a lobby shows;
// MaxJoinerName bounds a name's bytes (ledger.MaxNameLen).
const (
	MaxJoiners    = 8
	MaxJoinerName = ledger.MaxNameLen
)

// ValidJoinerName checks a joiner's display name: ledger.ValidName, the
// rule of every display name that goes on air.
func ValidJoinerName(name string) error { return ledger.ValidName(name) }

// Joiner is a participant who joined a quiz at a replica: their display
// name (ledger.ValidName's rule), when they joined by that replica's
// clock (ms), the order of their join there (joins in one millisecond),
// and who they are: the Hash of their voter id (0: not said, from a node
// of an older release), under which every node keeps the name as theirs
// (Names.Claim).
type Joiner struct {
	Name   string
	AtMs   int64
	Seq    uint64
	Holder uint64
}

type joinerReport struct {
	names []Joiner
	atMs  int64 // when it was reported (the sender's clock)
}

// SetJoiners records the newest participants who joined the poll's quiz
// at this replica, newest first (at most MaxJoiners are kept).
func (a *Audience) SetJoiners(pollID string, names []Joiner, nowMs int64) {
	a.MergeJoiners(pollID, a.replica, names, nowMs)
}

// MergeJoiners records another replica's report of its newest joiners,
// made at nowMs: as Merge, an older report than the one held, an unknown
// poll, and reports beyond maxViewerReports replicas change nothing; a
// name that is not a valid display name is dropped. Each joiner who says
// who they are keeps their name in the quiz's names (Names.Claim), unless
// it looks like a name another participant took here first.
func (a *Audience) MergeJoiners(pollID, replica string, names []Joiner, nowMs int64) {
	ps, err := a.poll(pollID)
	if err != nil {
		return
	}
	kept := make([]Joiner, 0, min(len(names), MaxJoiners))
	for _, j := range names {
		if len(kept) < MaxJoiners && ValidJoinerName(j.Name) == nil {
			kept = append(kept, j)
		}
	}
	ps.vmu.Lock()
	if ps.joiners == nil {
		ps.joiners = map[string]joinerReport{}
	}
	cur, ok := ps.joiners[replica]
	if !ok && len(ps.joiners) >= maxViewerReports || ok && cur.atMs > nowMs {
		ps.vmu.Unlock()
		return
	}
	ps.joiners[replica] = joinerReport{names: kept, atMs: nowMs}
	ps.vmu.Unlock()
	for _, j := range kept {
		if j.Holder != 0 {
			_ = ps.takeName(j.Holder, j.Name, true) // a look-alike of a name held here: the first stays
		}
	}
}

// OwnJoiners returns this replica's own report of the poll's newest
// joiners, and whether it has made one.
func (a *Audience) OwnJoiners(pollID string) ([]Joiner, bool) {
	ps, err := a.poll(pollID)
	if err != nil {
		return nil, false
	}
	ps.vmu.Lock()
	defer ps.vmu.Unlock()
	r, ok := ps.joiners[a.replica]
	return slices.Clone(r.names), ok
}

// Joiners returns the display names of the poll's quiz's newest joiners
// across the cluster at nowMs — this replica's own and every fresh
// report — newest first, each name once, at most MaxJoiners.
func (a *Audience) Joiners(pollID string, nowMs int64) []string {
	ps, err := a.poll(pollID)
	if err != nil {
		return nil
	}
	ps.vmu.Lock()
	var all []Joiner
	for r, rep := range ps.joiners {
		if r == a.replica || nowMs-rep.atMs <= ViewersFresh.Milliseconds() {
			all = append(all, rep.names...)
		}
	}
	ps.vmu.Unlock()
	// Newest first; in one millisecond by the order of the joins, then by
	// name, so every node lists the same names in the same order.
	slices.SortStableFunc(all, func(x, y Joiner) int {
		return cmp.Or(cmp.Compare(y.AtMs, x.AtMs), cmp.Compare(y.Seq, x.Seq), cmp.Compare(x.Name, y.Name))
	})
	names := make([]string, 0, min(len(all), MaxJoiners))
	for _, j := range all {
		if len(names) == MaxJoiners {
			break
		}
		if !slices.Contains(names, j.Name) {
			names = append(names, j.Name)
		}
	}
	return names
}
