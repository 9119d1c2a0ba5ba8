package ingest

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
	"tally/poll"
	"tally/state"
	"tally/trust"
)

// simClock is the simulation's time.
type simClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *simClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *simClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// simVote is one vote of the simulation at an instant.
type simVote struct {
	at     time.Duration // since the poll opened
	option string
	voter  string
	client Client
	honest bool
	token  time.Duration // when the voter's token was issued
}

var simOptions = []string{"a", "b", "c", "d"}

// honestVotes: 20,000 people. Most have an address of their own; a quarter
// share one with 2-10 others (home, office); one in twenty is behind a
// carrier's NAT with 100-400 others. Each loads the page (token) at a
// random moment, reads 0.5-5 s, taps, and one in ten changes their mind
// 0.5-5 s later.
func honestVotes(rng *rand.Rand) []simVote {
	prefs := []float64{0.38, 0.30, 0.20, 0.12} // a leads; the attacker pushes d
	pick := func() string {
		x, acc := rng.Float64(), 0.0
		for i, p := range prefs {
			if acc += p; x < acc {
				return simOptions[i]
			}
		}
		return simOptions[len(simOptions)-1]
	}
	var out []simVote
	ip, left := "", 0
	for i := range 20_000 {
		if left == 0 {
			switch r := rng.Float64(); {
			case r < 0.70:
				left = 1
			case r < 0.95:
				left = 2 + rng.IntN(9)
			default:
				left = 100 + rng.IntN(301)
			}
			ip = fmt.Sprintf("10.%d.%d.%d", i/65536%256, i/256%256, i%256)
		}
		left--
		voter := fmt.Sprintf("h%d", i)
		token := time.Duration(rng.Int64N(int64(24 * time.Second)))
		first := token + time.Duration(500+rng.IntN(4500))*time.Millisecond
		option := pick()
		out = append(out, simVote{at: first, option: option, voter: voter, client: Client{Sender: api.Sender{IP: ip}}, honest: true, token: token})
		if rng.IntN(10) == 0 {
			other := simOptions[(slices.Index(simOptions, option)+1+rng.IntN(3))%4]
			out = append(out, simVote{at: first + time.Duration(500+rng.IntN(4500))*time.Millisecond, option: other, voter: voter,
				client: Client{Sender: api.Sender{IP: ip}}, honest: true, token: token})
		}
	}
	return out
}

// attackVotes: one script voting for d at 50 times a person's tapping rate
// (a tap every 0.5-5 s: ~0.36/s; the script ~18/s) for the whole poll. The
// session endpoint lets one address have 20 tokens a minute, so the
// script has at most that many voter identities per address. Variants:
// from one address reusing its tokens, from 20 addresses of one datacenter
// range, and from one address using each token once as soon as it has it.
func attackVotes(kind string) []simVote {
	var out []simVote
	const perSec = 18
	tokensPerMin := 20
	for k := range 30 * perSec {
		at := time.Duration(k) * time.Second / perSec
		ip := "203.0.113.9"
		if kind == "datacenter" {
			ip = fmt.Sprintf("198.51.100.%d", 10+k%20)
		}
		// Tokens obtained so far by this address: one every 3 s.
		have := 1 + int(at/(time.Minute/time.Duration(tokensPerMin)))
		var id int
		var issued time.Duration
		switch kind {
		case "rotating": // each token used once, at once
			id, issued = have, time.Duration(have-1)*(time.Minute/time.Duration(tokensPerMin))
			if k > 0 && id == attackID(out[len(out)-1].voter) {
				continue // no new token yet: it waits (modelled as reuse of none)
			}
		default:
			id = k % have
			issued = time.Duration(id) * (time.Minute / time.Duration(tokensPerMin))
		}
		out = append(out, simVote{at: at, option: "d", voter: fmt.Sprintf("bot-%s-%d-%d", kind, k%20*boolInt(kind == "datacenter"), id),
			client: Client{Sender: api.Sender{IP: ip}}, token: issued})
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func attackID(voter string) int {
	var kind string
	var a, id int
	fmt.Sscanf(voter, "bot-%8s-%d-%d", &kind, &a, &id)
	return id
}

// runSimulation sends the votes through a pipeline (in-memory ledger, the
// trust floor at its default) in time order and returns the certified
// result and how many honest votes were shadowed.
func runSimulation(t *testing.T, votes []simVote) (*ledger.Result, int, int) {
	t.Helper()
	start := time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC)
	clk := &simClock{t: start}
	l, err := ledger.Open(ledger.Config{Dir: "sim", FS: vfs.NewMem(), Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st, _ := state.New(state.Config{Replica: "eu-1", Store: l})
	hc, _ := hlc.New(hlc.Config{Replica: "eu-1", Now: clk.now})
	def := poll.Definition{ID: "p", Question: "Who?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}, {ID: "c", Label: "C"}, {ID: "d", Label: "D"}},
		OpensAt: start.UnixMilli(), ClosesAt: start.Add(40 * time.Second).UnixMilli(), GraceMs: 2000}
	st.Defs.PutPoll(def, hlc.Timestamp{Wall: start.UnixMilli(), Replica: "eu-1"})
	p, err := New(Config{Ledger: l, State: st, Clock: hc, Limits: Limits{MaxBody: 1 << 14}, TrustFloor: trust.DefaultFloor,
		Datacenters: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(votes, func(a, b simVote) int { return int(a.at - b.at) })
	honestShadowed, honest := 0, 0
	for i, v := range votes {
		clk.set(start.Add(v.at))
		c := v.client
		c.TokenAge, c.SocketAge = v.at-v.token, -1
		res, err := p.SubmitFrom("p", []Vote{{Option: v.option, Voter: v.voter, Idem: fmt.Sprintf("i%d", i)}}, c)
		if err != nil || res[0].Status != StatusAccepted {
			t.Fatalf("vote %d: %+v %v", i, res, err)
		}
		if v.honest {
			honest++
		}
	}
	for r, err := range l.Scan("p") {
		if err != nil {
			t.Fatal(err)
		}
		if r.Voter[0] == 'h' && !r.Counted {
			honestShadowed++
		}
	}
	res, err := ledger.ReconcileWith(ledger.ReconcileConfig{ClosesAt: def.ClosesAt, TrustFloor: trust.DefaultFloor}, l.Scan("p"))
	if err != nil {
		t.Fatal(err)
	}
	// An auditor re-running the filter on the recorded signals reaches the
	// same decisions (tally ledger merge --rescore).
	again, err := ledger.ReconcileWith(ledger.ReconcileConfig{ClosesAt: def.ClosesAt, Shadow: func(r *ledger.Record) bool {
		return trust.Score(trust.FromLedger(r.Signals)) < trust.DefaultFloor
	}}, l.Scan("p"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != res.Digest {
		t.Fatalf("re-running the filter from the signals: shadowed %d vs %d", again.Shadowed, res.Shadowed)
	}
	return res, honestShadowed, honest
}

func shares(r *ledger.Result) map[string]float64 {
	out := map[string]float64{}
	for _, o := range simOptions {
		out[o] = 100 * float64(r.Totals[o]) / float64(r.Total)
	}
	return out
}

func winner(r *ledger.Result) string {
	best := ""
	for _, o := range simOptions {
		if best == "" || r.Totals[o] > r.Totals[best] {
			best = o
		}
	}
	return best
}

// TestAttackSimulation: 20,000 honest voters, then the same with a
// script stuffing votes for d; the certified winner and every option's
// share move by less than a percentage point, and fewer than 0.5% of
// honest votes are shadowed. Seeded; prints its figures.
func TestAttackSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 22,000 votes four times")
	}
	honest := honestVotes(rand.New(rand.NewPCG(42, 1)))
	base, shadowed, n := runSimulation(t, slices.Clone(honest))
	t.Logf("honest only: winner %s, shares %v, honest votes shadowed %d of %d (%.2f%%)", winner(base), shares(base), shadowed, n, 100*float64(shadowed)/float64(n))
	if float64(shadowed) >= 0.005*float64(n) {
		t.Errorf("honest only: %d of %d honest votes shadowed (≥ 0.5%%)", shadowed, n)
	}
	for _, kind := range []string{"one-address", "datacenter", "rotating"} {
		attack := attackVotes(kind)
		res, shadowed, n := runSimulation(t, append(slices.Clone(honest), attack...))
		maxShift := 0.0
		for o, s := range shares(res) {
			maxShift = max(maxShift, abs(s-shares(base)[o]))
		}
		t.Logf("%s: %d attack votes; winner %s, largest share shift %.3f pp, honest shadowed %d of %d (%.2f%%), shadowed in all %d",
			kind, len(attack), winner(res), maxShift, shadowed, n, 100*float64(shadowed)/float64(n), res.Shadowed)
		if winner(res) != winner(base) || maxShift >= 1 {
			t.Errorf("%s: winner %s (was %s), share moved %.3f pp", kind, winner(res), winner(base), maxShift)
		}
		if float64(shadowed) >= 0.005*float64(n) {
			t.Errorf("%s: %d of %d honest votes shadowed", kind, shadowed, n)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
