package relay

import (
	"sync"
	"time"
)

// pace is the full nodes' reply time as an edge measured it (smoothed as
// TCP smooths its round trips, RFC 6298's 1/8), and the batch window it
// sets: while a batch is in flight, the next one gathers for about one
// reply time (at least EdgeConfig.Wait, at most MaxWait), so a busy full
// node — slower to answer — gets fewer, fuller messages, and an idle one
// gets a message within Wait.
//
// The attempt timeout does not follow it. It did for a while (the
// smoothed time plus four deviations, at least 200 ms): under the full
// test command's load, replies slower than that were sent to a second
// full node, which made both slower still, and most of a test's votes
// came back 504 outcome_unknown. A dead full node is found by its
// closed connection (NATS says no one listens, and the edge's leaf link
// redials in 100-200 ms), not by a timeout; only a frozen one waits out
// EdgeConfig.Attempt.
//
// Every answer is a sample of its own attempt: each attempt has its own
// reply subject, so the ambiguity Karn's rule guards TCP against does
// not arise.
type pace struct {
	mu   sync.Mutex
	srtt time.Duration // zero until the first sample
}

// observe takes one reply time.
func (p *pace) observe(rtt time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srtt == 0 {
		p.srtt = rtt
		return
	}
	p.srtt += (rtt - p.srtt) / 8
}

// window is how long a batch gathers while another is in flight.
func (p *pace) window(least, most time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return min(max(p.srtt, least), most)
}
