package certify

import (
	"errors"
	"reflect"
	"testing"

	"tally/api"
	"tally/ledger"
)

// The plan of an attempt at its edges: nobody known, one replica, a live
// full member not heard of yet, a dead one with and without records, an
// exclusion, decisions naming a replica the poll does not have.
func TestPlan(t *testing.T) {
	live := func(full bool, rs ...string) map[string]Peer {
		out := map[string]Peer{}
		for _, r := range rs {
			out[r] = Peer{Replica: r, Full: full}
		}
		return out
	}
	for name, c := range map[string]struct {
		expected map[string]uint64
		peers    map[string]Peer
		d        Decisions
		replicas []string
		missing  []string
		err      error
	}{
		"nothing known, alone":          {nil, nil, Decisions{}, nil, nil, nil},
		"only this replica":             {map[string]uint64{"self": 3}, nil, Decisions{}, []string{"self"}, nil, nil},
		"a live full member not heard":  {map[string]uint64{"self": 3}, live(true, "b"), Decisions{}, []string{"b", "self"}, nil, nil},
		"a live edge is not a replica":  {map[string]uint64{"self": 3}, live(false, "e"), Decisions{}, []string{"self"}, nil, nil},
		"a dead replica with records":   {map[string]uint64{"self": 3, "b": 2}, nil, Decisions{}, []string{"self"}, []string{"b"}, nil},
		"a dead replica without any":    {map[string]uint64{"self": 3, "b": 0}, nil, Decisions{}, []string{"self"}, nil, nil},
		"a dead replica excluded":       {map[string]uint64{"self": 3, "b": 2}, nil, Decisions{Exclude: []api.Exclusion{{Replica: "b"}}}, []string{"self"}, nil, nil},
		"a live replica excluded":       {map[string]uint64{"self": 3, "b": 2}, live(true, "b"), Decisions{Exclude: []api.Exclusion{{Replica: "b"}}}, []string{"self"}, nil, nil},
		"excluding a stranger":          {map[string]uint64{"self": 3}, nil, Decisions{Exclude: []api.Exclusion{{Replica: "zz"}}}, nil, nil, ErrDecision},
		"accepting a stranger's losses": {map[string]uint64{"self": 3}, nil, Decisions{AcceptLost: []api.Exclusion{{Replica: "zz"}}}, nil, nil, ErrDecision},
	} {
		replicas, missing, err := plan("p", c.expected, c.peers, "self", c.d)
		if !sameErr(err, c.err) {
			t.Errorf("%s: err %v, want %v", name, err, c.err)
			continue
		}
		gotMissing := missingReplicas(missing)
		if !reflect.DeepEqual(replicas, c.replicas) || !reflect.DeepEqual(gotMissing, c.missing) {
			t.Errorf("%s: read %v, missing %v; want %v, %v", name, replicas, gotMissing, c.replicas, c.missing)
		}
	}
}

// Judging what was read: complete, short, absent, each with and without a
// decision that accepts the loss; a decision with nothing to accept.
func TestJudge(t *testing.T) {
	chain := func(r string, n uint64) ledger.Chain { return ledger.Chain{Replica: r, Records: n} }
	accept := []api.Exclusion{{Replica: "b", Reason: "disk lost"}}
	for name, c := range map[string]struct {
		expected map[string]uint64
		got      []ledger.Chain
		accept   []api.Exclusion
		lost     []api.Lost
		missing  []string
		err      error
	}{
		"complete":            {map[string]uint64{"a": 2, "b": 1}, []ledger.Chain{chain("a", 2), chain("b", 1)}, nil, nil, nil, nil},
		"more than known":     {map[string]uint64{"a": 2}, []ledger.Chain{chain("a", 5), chain("b", 1)}, nil, nil, nil, nil},
		"short":               {map[string]uint64{"a": 2, "b": 4}, []ledger.Chain{chain("a", 2), chain("b", 1)}, nil, nil, []string{"b"}, nil},
		"short, accepted":     {map[string]uint64{"a": 2, "b": 4}, []ledger.Chain{chain("a", 2), chain("b", 1)}, accept, []api.Lost{{Replica: "b", From: 2, To: 4, Count: 3, Reason: "disk lost"}}, nil, nil},
		"absent":              {map[string]uint64{"a": 2, "b": 4}, []ledger.Chain{chain("a", 2)}, nil, nil, []string{"b"}, nil},
		"absent, accepted":    {map[string]uint64{"a": 2, "b": 4}, []ledger.Chain{chain("a", 2)}, accept, []api.Lost{{Replica: "b", From: 1, To: 4, Count: 4, Reason: "disk lost"}}, nil, nil},
		"absent, none known":  {map[string]uint64{"a": 2, "b": 0}, []ledger.Chain{chain("a", 2)}, nil, nil, nil, nil},
		"nothing to accept":   {map[string]uint64{"a": 2, "b": 1}, []ledger.Chain{chain("a", 2), chain("b", 1)}, accept, nil, nil, ErrDecision},
		"the maximum, intact": {map[string]uint64{"a": ^uint64(0)}, []ledger.Chain{chain("a", ^uint64(0))}, nil, nil, nil, nil},
	} {
		lost, missing, err := judge("p", c.expected, []string{"a", "b"}, c.got, c.accept)
		if !sameErr(err, c.err) {
			t.Errorf("%s: err %v, want %v", name, err, c.err)
			continue
		}
		gotMissing := missingReplicas(missing)
		if !reflect.DeepEqual(lost, c.lost) || !reflect.DeepEqual(gotMissing, c.missing) {
			t.Errorf("%s: lost %+v, missing %v; want %+v, %v", name, lost, gotMissing, c.lost, c.missing)
		}
	}
}

// sameErr reports whether err is want (nil with nil).
func sameErr(err, want error) bool {
	return errors.Is(err, want) && (err != nil) == (want != nil)
}

// missingReplicas names the replicas of a list of missing ones.
func missingReplicas(missing []api.Missing) []string {
	var out []string
	for _, m := range missing {
		out = append(out, m.Replica)
	}
	return out
}
