package certify

import (
	"encoding/json"
	"errors"
	"testing"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
	"tally/state"
)

// reconciled is a reconciled certificate by us-1 covering the given
// records per replica, with the operator's decisions.
func reconciled(t *testing.T, covered map[string]uint64, excluded, lost []string) state.Certificate {
	t.Helper()
	d := api.ResultDetail{Coordinator: "node-us", Result: &ledger.Result{Poll: "p", Digest: "d"}}
	for r, n := range covered {
		d.Result.Replicas = append(d.Result.Replicas, ledger.Chain{Poll: "p", Replica: r, Records: n})
	}
	for _, r := range excluded {
		d.Excluded = append(d.Excluded, api.Exclusion{Replica: r, Reason: "disk gone"})
	}
	for _, r := range lost {
		d.Lost = append(d.Lost, api.Lost{Replica: r, From: 1, To: 9, Count: 9, Reason: "old backup"})
	}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return state.Certificate{Poll: "p", Status: state.Reconciled, TS: hlc.Timestamp{Wall: 1, Replica: "us-1"}, By: "us-1", Digest: "d", Detail: raw}
}

// TestCoversRefusesACertificateShortOfKnownRecords is the receiving
// node's check (issue 44): a certificate that leaves out a replica the
// node knows holds records, or covers fewer of them, is refused, naming
// the replica and the coordinator, unless an operator decided so.
func TestCoversRefusesACertificateShortOfKnownRecords(t *testing.T) {
	known := map[string]uint64{"eu-1": 200, "us-1": 200, "ap-1": 200}
	for _, tc := range []struct {
		name      string
		cert      state.Certificate
		short     string // the replica named, "" when accepted
		certified uint64
	}{
		{"every replica, every record", reconciled(t, map[string]uint64{"eu-1": 200, "us-1": 200, "ap-1": 200}, nil, nil), "", 0},
		{"more than known (counts still spreading)", reconciled(t, map[string]uint64{"eu-1": 201, "us-1": 200, "ap-1": 250}, nil, nil), "", 0},
		{"one replica only (the restarted coordinator's)", reconciled(t, map[string]uint64{"eu-1": 200}, nil, nil), "ap-1", 0},
		{"a replica short", reconciled(t, map[string]uint64{"eu-1": 200, "us-1": 199, "ap-1": 200}, nil, nil), "us-1", 199},
		{"left out by --exclude", reconciled(t, map[string]uint64{"eu-1": 200, "us-1": 200}, []string{"ap-1"}, nil), "", 0},
		{"short by --accept-lost", reconciled(t, map[string]uint64{"eu-1": 200, "us-1": 120, "ap-1": 200}, nil, []string{"us-1"}), "", 0},
		{"no votes anywhere is fine for a replica with none", reconciled(t, map[string]uint64{"eu-1": 200, "us-1": 200, "ap-1": 200, "zz-1": 0}, nil, nil), "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Covers(tc.cert, known)
			if tc.short == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			se, ok := errors.AsType[*ShortError](err)
			if !ok || !errors.Is(err, ErrShortCertificate) {
				t.Fatalf("accepted or untyped: %v", err)
			}
			if se.Replica != tc.short || se.Known != 200 || se.Certified != tc.certified || se.Coordinator != "node-us" || se.By != "us-1" {
				t.Fatalf("names %+v, want replica %s certified %d", se, tc.short, tc.certified)
			}
		})
	}
	t.Run("pending always passes", func(t *testing.T) {
		c := state.Certificate{Poll: "p", Status: state.Pending, TS: hlc.Timestamp{Wall: 1}, By: "us-1", Reason: "ap-1: not a live member"}
		if err := Covers(c, known); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a reconciled certificate without a result is refused", func(t *testing.T) {
		for _, detail := range []string{``, `{}`, `not json`, `{"result":null}`} {
			c := reconciled(t, nil, nil, nil)
			c.Detail = json.RawMessage(detail)
			if err := Covers(c, known); !errors.Is(err, ErrShortCertificate) {
				t.Fatalf("detail %q: %v", detail, err)
			}
		}
	})
	t.Run("a node that knows of nothing accepts", func(t *testing.T) {
		if err := Covers(reconciled(t, map[string]uint64{"eu-1": 1}, nil, nil), nil); err != nil {
			t.Fatal(err)
		}
	})
}
