package trust

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestScoreSignals(t *testing.T) {
	person := Signals{SincePrevious: 0, IPVotesPerMin: 3, IPVoters: 1, TokenAge: 20 * time.Second, SocketAge: -1}
	if s := Score(person); s != 1 {
		t.Fatalf("a person scores %v, want 1", s)
	}
	cases := map[string]func(*Signals){
		"votes again within 300ms": func(s *Signals) { s.SincePrevious = 100 * time.Millisecond },
		"votes again within 1s":    func(s *Signals) { s.SincePrevious = 600 * time.Millisecond },
		"address floods":           func(s *Signals) { s.IPVotesPerMin = 5000 },
		"address has many voters":  func(s *Signals) { s.IPVoters = 5000 },
		"brand-new token":          func(s *Signals) { s.TokenAge = 200 * time.Millisecond },
		"young token":              func(s *Signals) { s.TokenAge = 2 * time.Second },
		"socket opened to vote":    func(s *Signals) { s.SocketAge = 100 * time.Millisecond },
		"datacenter":               func(s *Signals) { s.Datacenter = true },
		"token past the budget":    func(s *Signals) { s.OverBudget = true },
	}
	for name, worsen := range cases {
		s := person
		worsen(&s)
		if got := Score(s); got >= 1 || got <= 0 {
			t.Errorf("%s: score %v, want in (0, 1)", name, got)
		}
	}
	// What a carrier NAT of 400 phones looks like stays above the floor.
	nat := Signals{IPVotesPerMin: 1000, IPVoters: 400, TokenAge: 1500 * time.Millisecond, SocketAge: -1}
	if s := Score(nat); s < DefaultFloor {
		t.Errorf("a busy carrier NAT scores %v, under the floor", s)
	}
	// A token past its address's vouched ones is under it, however human
	// the rest looks.
	if s := Score(Signals{IPVotesPerMin: 1, IPVoters: 1, TokenAge: time.Hour, SocketAge: -1, OverBudget: true}); s >= DefaultFloor {
		t.Errorf("a token past the budget scores %v, over the floor", s)
	}
	// A datacenter address voting with a fresh token is under it.
	bot := Signals{IPVotesPerMin: 50, IPVoters: 20, TokenAge: 100 * time.Millisecond, SocketAge: -1, Datacenter: true}
	if s := Score(bot); s >= DefaultFloor {
		t.Errorf("a datacenter script scores %v, over the floor", s)
	}
}

// TestScoreIsMonotone: making any one signal worse never raises the score.
func TestScoreIsMonotone(t *testing.T) {
	dur := func(name string, neg bool) *rapid.Generator[time.Duration] {
		lo := int64(0)
		if neg {
			lo = -1
		}
		return rapid.Custom(func(t *rapid.T) time.Duration {
			return time.Duration(rapid.Int64Range(lo, int64(20*time.Second)).Draw(t, name))
		})
	}
	rapid.Check(t, func(t *rapid.T) {
		s := Signals{
			SincePrevious: dur("gap", false).Draw(t, "gap"),
			IPVotesPerMin: rapid.Float64Range(0, 1e5).Draw(t, "rate"),
			IPVoters:      rapid.IntRange(0, 1e5).Draw(t, "voters"),
			TokenAge:      dur("token", true).Draw(t, "token"),
			SocketAge:     dur("socket", true).Draw(t, "socket"),
			Datacenter:    rapid.Bool().Draw(t, "dc"),
		}
		base := Score(s)
		if base < 0 || base > 1 {
			t.Fatalf("score %v out of [0, 1]", base)
		}
		w := s
		switch rapid.IntRange(0, 5).Draw(t, "which") {
		case 0: // a shorter gap since a previous vote (a first vote stays a first vote)
			if s.SincePrevious > 0 {
				w.SincePrevious = time.Duration(rapid.Int64Range(1, int64(s.SincePrevious)).Draw(t, "shorter"))
			}
		case 1:
			w.IPVotesPerMin += rapid.Float64Range(0, 1e5).Draw(t, "more")
		case 2:
			w.IPVoters += rapid.IntRange(0, 1e5).Draw(t, "more voters")
		case 3: // a younger token (no token stays no token)
			if s.TokenAge >= 0 {
				w.TokenAge = time.Duration(rapid.Int64Range(0, int64(s.TokenAge)).Draw(t, "younger"))
			}
		case 4:
			if s.SocketAge >= 0 {
				w.SocketAge = time.Duration(rapid.Int64Range(0, int64(s.SocketAge)).Draw(t, "younger socket"))
			}
		case 5:
			w.Datacenter = true
		}
		if Score(w) > base {
			t.Fatalf("a worse signal raised the score: %+v → %v, %+v → %v", s, base, w, Score(w))
		}
	})
}
