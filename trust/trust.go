package trust

import (
	"math"
	"time"

	"tally/ledger"
)

// Signals are what a vote's trust score is computed from. Each is a fact
// about the vote's client at the moment it arrives.
type Signals struct {
	SincePrevious time.Duration // since this voter's previous vote here; 0: none
	IPVotesPerMin float64       // votes from the client's address over the last minute, this one included
	IPVoters      int           // distinct voters seen from the address in the last 10 minutes
	TokenAge      time.Duration // age of the voter token; < 0: no token
	SocketAge     time.Duration // age of the WebSocket the vote came on; < 0: not over a socket
	Datacenter    bool          // the address is in a configured datacenter/proxy range
	// OverBudget: the voter token is past the ones its address group has
	// vouched (budget.go): one address never weighs more than its budget.
	OverBudget bool
}

// Score combines the signals multiplicatively into [0, 1]: each factor is
// 1 for what people do and shrinks for what scripts do, and none rises
// when its signal gets worse, so neither does the score. The thresholds
// leave room for people behind a carrier's shared address (hundreds of
// phones on one IP).
func Score(s Signals) float64 {
	f := 1.0
	switch { // a voter voting again almost at once
	case s.SincePrevious <= 0:
	case s.SincePrevious < 300*time.Millisecond:
		f *= 0.3
	case s.SincePrevious < time.Second:
		f *= 0.7
	}
	if s.IPVotesPerMin > 600 { // far beyond a busy shared address
		f *= math.Sqrt(600 / s.IPVotesPerMin)
	}
	if s.IPVoters > 300 {
		f *= math.Sqrt(300 / float64(s.IPVoters))
	}
	switch { // a token used the moment it was issued
	case s.TokenAge < 0:
	case s.TokenAge < time.Second:
		f *= 0.4
	case s.TokenAge < 3*time.Second:
		f *= 0.8
	}
	if s.SocketAge >= 0 && s.SocketAge < time.Second { // a socket opened to vote, not to watch
		f *= 0.6
	}
	if s.Datacenter {
		f *= 0.1
	}
	if s.OverBudget {
		f *= 0.1
	}
	return f
}

// Ledger converts the signals to the form kept in the vote's record.
func (s Signals) Ledger() *ledger.Signals {
	ms := func(d time.Duration) int64 {
		if d < 0 {
			return -1
		}
		return d.Milliseconds()
	}
	return &ledger.Signals{SincePrevMs: ms(s.SincePrevious), IPVotesPerMin: uint64(math.Round(s.IPVotesPerMin)), IPVoters: uint64(s.IPVoters),
		TokenAgeMs: ms(s.TokenAge), SocketAgeMs: ms(s.SocketAge), Datacenter: s.Datacenter, OverBudget: s.OverBudget}
}

// FromLedger is the inverse of the conversion above, for re-running the
// filter on exported records.
func FromLedger(l *ledger.Signals) Signals {
	d := func(ms int64) time.Duration {
		if ms < 0 {
			return -1
		}
		return time.Duration(ms) * time.Millisecond
	}
	return Signals{SincePrevious: d(l.SincePrevMs), IPVotesPerMin: float64(l.IPVotesPerMin), IPVoters: int(l.IPVoters),
		TokenAge: d(l.TokenAgeMs), SocketAge: d(l.SocketAgeMs), Datacenter: l.Datacenter, OverBudget: l.OverBudget}
}

// DefaultFloor is the score under which a vote is shadowed.
const DefaultFloor = 0.15
