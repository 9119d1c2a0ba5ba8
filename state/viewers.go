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

type viewerCount struct {
	n    int64
	atMs int64 // when it was reported (this node's clock)
}

// SetViewers records how many viewers of the poll this replica serves.
func (s *State) SetViewers(pollID string, n int64, nowMs int64) {
	s.MergeViewers(pollID, s.replica, n, nowMs)
}

// MergeViewers records another replica's report of the viewers it serves,
// made at nowMs (the sender's time: a replayed old report changes
// nothing). Reports older than the one held, for unknown polls, negative
// counts and reports beyond maxViewerReports replicas a poll are ignored.
func (s *State) MergeViewers(pollID, replica string, n int64, nowMs int64) {
	ps, err := s.poll(pollID)
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

// OwnViewers returns this replica's count of the poll's viewers, and
// whether it has reported one.
func (s *State) OwnViewers(pollID string) (int64, bool) {
	ps, err := s.poll(pollID)
	if err != nil {
		return 0, false
	}
	ps.vmu.Lock()
	defer ps.vmu.Unlock()
	c, ok := ps.viewers[s.replica]
	return c.n, ok
}

// Viewers returns the poll's viewers across the cluster at nowMs: this
// replica's own count and every other replica's fresh report.
func (s *State) Viewers(pollID string, nowMs int64) int64 {
	ps, err := s.poll(pollID)
	if err != nil {
		return 0
	}
	ps.vmu.Lock()
	defer ps.vmu.Unlock()
	var sum int64
	for r, c := range ps.viewers {
		if r == s.replica || nowMs-c.atMs <= ViewersFresh.Milliseconds() {
			sum += c.n
		}
	}
	return sum
}
