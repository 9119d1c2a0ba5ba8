package quiz

import "testing"

func TestElapsed(t *testing.T) {
	const limit = 20_000
	for name, c := range map[string]struct {
		m    Moments
		want int64
	}{
		"nothing known: no time":             {Moments{Received: 5000}, 0},
		"from the socket's moment":           {Moments{Shown: 1000, Received: 3500}, 2500},
		"an earlier socket's moment wins":    {Moments{Shown: 4000, FirstShown: 1000, Received: 5000}, 4000},
		"a fresh socket gains at most 1 s":   {Moments{Shown: 9000, OpensAt: 1000, Received: 9500}, 7500},
		"the opening bound, nothing shown":   {Moments{OpensAt: 1000, Received: 3000}, 1000},
		"shown before the bound: the moment": {Moments{Shown: 1200, OpensAt: 1000, Received: 3000}, 1800},
		"a clock behind the moment: zero":    {Moments{Shown: 5000, Received: 4000}, 0},
		"past the limit: the limit":          {Moments{Shown: 1, Received: 1 + 3*limit}, limit},
		"exactly the limit":                  {Moments{Shown: 1, Received: 1 + limit}, limit},
		"one ms":                             {Moments{Shown: 1, Received: 2}, 1},
	} {
		if got := Elapsed(c.m, limit); got != c.want {
			t.Errorf("%s: %d ms, want %d", name, got, c.want)
		}
	}
	if got := Elapsed(Moments{Shown: 1, Received: 100}, -5); got != 0 {
		t.Errorf("a negative limit: %d, want 0", got)
	}
}
