package state

import "time"

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
