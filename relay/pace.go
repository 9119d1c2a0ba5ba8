package relay

import (
	"sync"
	"time"
)

// pace is what an edge has measured of its full nodes' reply times, and
// the two durations it sets by them:
//
//   - the batch window: while a batch is in flight, the next one gathers
//     for about one reply time (at least EdgeConfig.Wait, at most
//     MaxWait), so a busy full node — slower to answer — gets fewer,
//     fuller messages, and an idle one gets a message within Wait;
//   - the attempt timeout: how long an attempt waits before the batch
//     goes to the next full node of its route, as TCP sets its
//     retransmission timeout (RFC 6298: the smoothed reply time plus four
//     times its mean deviation), between MinAttempt and
//     EdgeConfig.Attempt. A full node that dies with a batch in hand
//     costs its clients about that, not the configured ceiling.
//
// Only the reply to the attempt it answers is a sample (an answer to an
// earlier attempt, heard after a resend, would count the failover).
type pace struct {
	mu           sync.Mutex
	srtt, rttvar time.Duration // zero until the first sample
}

// MinAttempt is the shortest attempt timeout an edge sets from its
// measurements: below it, a commit held up by one slow fsync would send
// its batch to a second full node.
const MinAttempt = 200 * time.Millisecond

// observe takes one reply time.
func (p *pace) observe(rtt time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srtt == 0 {
		p.srtt, p.rttvar = rtt, rtt/2
		return
	}
	dev := p.srtt - rtt
	if dev < 0 {
		dev = -dev
	}
	p.rttvar += (dev - p.rttvar) / 4
	p.srtt += (rtt - p.srtt) / 8
}

// window is how long a batch gathers while another is in flight.
func (p *pace) window(least, most time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return min(max(p.srtt, least), most)
}

// attempt is how long one attempt waits for its answer: ceiling until
// anything was measured.
func (p *pace) attempt(ceiling time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srtt == 0 {
		return ceiling
	}
	return min(max(p.srtt+4*p.rttvar, MinAttempt), ceiling)
}
