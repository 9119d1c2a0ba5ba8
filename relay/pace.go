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
//     retransmission timeout (RFC 6298): the smoothed reply time plus
//     four times its mean deviation, between MinAttempt and
//     EdgeConfig.Attempt, doubled at each attempt that timed out until
//     an answer is measured again (§5.5), so replies slower than the
//     timeout raise it rather than double every batch. A full node that
//     dies with a batch in hand costs its clients about the timeout, not
//     the configured ceiling.
//
// Every answer is a sample of its own attempt: each attempt has its own
// reply subject, so the ambiguity Karn's rule guards TCP against does not
// arise.
type pace struct {
	mu           sync.Mutex
	srtt, rttvar time.Duration // zero until the first sample
	backoff      time.Duration // the timeout doubled after timeouts; 0: none
}

// MinAttempt is the shortest attempt timeout an edge sets from its
// measurements: below it, a commit held up by one slow fsync would send
// its batch to a second full node.
const MinAttempt = 200 * time.Millisecond

// observe takes one reply time.
func (p *pace) observe(rtt time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backoff = 0
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

// timedOut doubles the attempt timeout, up to ceiling, until the next
// sample.
func (p *pace) timedOut(ceiling time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backoff = min(2*p.timeout(ceiling), ceiling)
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
	return p.timeout(ceiling)
}

func (p *pace) timeout(ceiling time.Duration) time.Duration {
	switch {
	case p.backoff > 0:
		return p.backoff
	case p.srtt == 0:
		return ceiling
	}
	return min(max(p.srtt+4*p.rttvar, MinAttempt), ceiling)
}
