package certify

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"tally/api"
	"tally/ledger"
)

// plan decides, before anything is read, which replicas' records an
// attempt collects: every replica known to hold records of the poll
// (expected: replica → records it holds, as far as this node knows) and
// every live full member (peers; its export says what it holds), except
// the excluded. A replica that holds records but is not a live member
// (self aside) is missing: the attempt is pending. A decision that names
// a replica the poll does not have is refused (ErrDecision).
func plan(poll string, expected map[string]uint64, peers map[string]Peer, self string, d Decisions) (replicas []string, missing []api.Missing, err error) {
	known := maps.Clone(expected)
	if known == nil {
		known = map[string]uint64{}
	}
	for r, p := range peers {
		if _, ok := known[r]; !ok && p.Full {
			known[r] = 0
		}
	}
	for _, e := range append(slices.Clone(d.Exclude), d.AcceptLost...) {
		if _, ok := known[e.Replica]; !ok {
			return nil, nil, fmt.Errorf("%w: poll %q has no replica %s (its replicas: %s)", ErrDecision, poll, e.Replica,
				strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
	}
	for _, r := range slices.Sorted(maps.Keys(known)) {
		if slices.ContainsFunc(d.Exclude, func(e api.Exclusion) bool { return e.Replica == r }) {
			continue
		}
		if _, live := peers[r]; !live && r != self {
			if known[r] > 0 {
				missing = append(missing, api.Missing{Replica: r, Expected: known[r], Error: "not a live member of the cluster"})
			}
			continue
		}
		replicas = append(replicas, r)
	}
	return replicas, missing, nil
}

// judge compares the chains read (got) with what each replica was known
// to hold: a replica short of its count, or with no chain though it held
// records, is missing, unless a decision accepts its records as lost (then
// the gap is stated). Accepting as lost a replica that lacks nothing is
// refused (ErrDecision).
func judge(poll string, expected map[string]uint64, replicas []string, got []ledger.Chain, acceptLost []api.Exclusion) (lost []api.Lost, missing []api.Missing, err error) {
	accepted := func(r string) (api.Exclusion, bool) {
		i := slices.IndexFunc(acceptLost, func(e api.Exclusion) bool { return e.Replica == r })
		if i < 0 {
			return api.Exclusion{}, false
		}
		return acceptLost[i], true
	}
	for _, ch := range got {
		want := expected[ch.Replica]
		if ch.Records >= want {
			continue
		}
		if e, ok := accepted(ch.Replica); ok {
			lost = append(lost, api.Lost{Replica: ch.Replica, From: ch.Records + 1, To: want, Count: want - ch.Records, Reason: e.Reason})
			continue
		}
		missing = append(missing, api.Missing{Replica: ch.Replica, Expected: want, Received: ch.Records,
			Error: "export shorter than the gossiped record count (restored from an older backup? see --accept-lost)"})
	}
	for _, r := range replicas {
		if expected[r] == 0 || slices.ContainsFunc(got, func(ch ledger.Chain) bool { return ch.Replica == r }) {
			continue
		}
		if e, ok := accepted(r); ok {
			lost = append(lost, api.Lost{Replica: r, From: 1, To: expected[r], Count: expected[r], Reason: e.Reason})
			continue
		}
		missing = append(missing, api.Missing{Replica: r, Expected: expected[r], Error: "export held no records"})
	}
	if len(missing) > 0 {
		return lost, missing, nil
	}
	for _, e := range acceptLost {
		if !slices.ContainsFunc(lost, func(l api.Lost) bool { return l.Replica == e.Replica }) {
			return lost, nil, fmt.Errorf("%w: replica %s holds every record it acknowledged of poll %q: nothing to accept as lost", ErrDecision, e.Replica, poll)
		}
	}
	return lost, nil, nil
}
