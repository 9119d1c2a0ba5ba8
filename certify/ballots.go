package certify

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
	"tally/state"
)

// A replica certified from a copy (fromcopy.go) is gone, and so are the
// ballots its last deltas never carried: a node that does not hold one
// takes a retry of its key as new — after the close, 409 poll_closed, or
// 503 while it still waits for ballots. Its buddy holds them (it applies
// the ballots of every copy it takes), the others do not. So once a
// poll's certificate names replicas read from copies, every full node
// makes sure it holds their ballots up to the records certified
// (cfg.Ballots applies them, as a buddy applies its copies'): the
// coordinator from the records it read, the others from the copy's
// holder (the certificate names it), checked against the certified chain
// head. A retry of any key the certificate counts is then answered
// "duplicate" with its vote id, at every full node.

// copiedKeys keeps this node's ballots of the replicas certificates read
// from copies: apply (Config.Ballots) applies records' ballots; done and
// try say, per poll, the certificate whose copied replicas' ballots this
// node holds, and the last try of the others.
type copiedKeys struct {
	st    *state.State
	apply func(recs []ledger.Record) // nil: none applied, nothing done
	retry time.Duration

	mu   sync.Mutex
	done map[string]hlc.Timestamp // poll → the certificate's time
	try  map[string]time.Time     // poll → the last try (monotonic)
}

// hold applies, at the coordinator, the ballots of the replicas it read
// from copies (fromCopy), from the chains it collected (in replicas'
// order).
func (k *copiedKeys) hold(replicas []string, chains [][]*ledger.Record, fromCopy []api.CopySource) {
	if k.apply == nil {
		return
	}
	for _, src := range fromCopy {
		if i := slices.Index(replicas, src.Replica); i >= 0 && i < len(chains) {
			k.merge(chains[i])
		}
	}
}

// merge applies the records' ballots.
func (k *copiedKeys) merge(recs []*ledger.Record) {
	vals := make([]ledger.Record, len(recs))
	for i, r := range recs {
		vals[i] = *r
	}
	k.apply(vals)
}

// copiedChain is a replica read from a copy whose ballots this node does
// not all hold: its holder and its chain as certified.
type copiedChain struct {
	replica, holder string
	chain           ledger.Chain
	have            uint64 // ballots held, seq 1 to have
}

// due reports whether poll's reconciled certificate names replicas read
// from copies whose ballots this node does not all hold, and it is time
// to try again; a poll that holds them all is not looked at again until
// another certificate replaces this one.
func (k *copiedKeys) due(poll string, cert state.Certificate, mono time.Time) bool {
	if k.apply == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if done, ok := k.done[poll]; ok && done == cert.TS {
		return false
	}
	if last, ok := k.try[poll]; ok && mono.Sub(last) < k.retry {
		return false
	}
	if len(k.short(poll, cert)) == 0 {
		k.done[poll] = cert.TS
		delete(k.try, poll)
		return false
	}
	k.try[poll] = mono
	return true
}

// forget drops what due kept of polls no longer held.
func (k *copiedKeys) forget(held func(poll string) bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for poll := range k.done {
		if !held(poll) {
			delete(k.done, poll)
		}
	}
	for poll := range k.try {
		if !held(poll) {
			delete(k.try, poll)
		}
	}
}

// short lists the replicas cert read from copies whose ballots this node
// holds fewer of than the certificate counts records.
func (k *copiedKeys) short(poll string, cert state.Certificate) []copiedChain {
	var d api.ResultDetail
	if json.Unmarshal(cert.Detail, &d) != nil || d.Result == nil || len(d.FromCopy) == 0 {
		return nil
	}
	have, err := k.st.BallotsHave(poll)
	if err != nil {
		return nil
	}
	var out []copiedChain
	for _, src := range d.FromCopy {
		i := slices.IndexFunc(d.Result.Replicas, func(ch ledger.Chain) bool { return ch.Replica == src.Replica })
		if i < 0 || have[src.Replica] >= d.Result.Replicas[i].Records {
			continue
		}
		out = append(out, copiedChain{replica: src.Replica, holder: src.Holder, chain: d.Result.Replicas[i], have: have[src.Replica]})
	}
	return out
}

// copiedBallots reads, for each replica poll's certificate read from a
// copy, the records this node holds no ballot of from a live full node's
// copy — its holder's first — and applies their ballots. The records must
// end at the chain head certified, each linked to the one before: so they
// are the ones the certificate counts, whoever serves them.
func (c *Certifier) copiedBallots(ctx context.Context, poll string) {
	cert, ok := c.cfg.State.Defs.Certificate(poll)
	if !ok || cert.Status != state.Reconciled {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, cc := range c.keys.short(poll, cert) {
		var errs []error
		for _, p := range holdersFirst(c.members.live(), cc.holder) {
			p.CopyOf, p.Holder = cc.replica, p.Replica
			recs, err := readCertified(ctx, c.fetch, p, poll, cc)
			if err == nil {
				c.keys.merge(recs)
				c.log.Info("the ballots of a replica certified from its copy are held here now", "poll", poll, "replica", cc.replica,
					"from", p.Replica, "ballots", len(recs))
				errs = nil
				break
			}
			errs = append(errs, fmt.Errorf("%s: %w", p.Replica, err))
		}
		if len(errs) > 0 {
			c.log.Warn("cannot read the ballots of a replica certified from its copy; will retry", "poll", poll, "replica", cc.replica, "errs", errs)
		}
	}
}

// holdersFirst is the full members of peers, holder first.
func holdersFirst(peers []Peer, holder string) []Peer {
	var out []Peer
	for _, p := range peers {
		if !p.Full {
			continue
		}
		if p.Replica == holder {
			out = append([]Peer{p}, out...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// readCertified reads p's copy of cc's replica after the ballots held and
// checks that it ends at the certified chain head.
func readCertified(ctx context.Context, fetch Fetcher, p Peer, poll string, cc copiedChain) ([]*ledger.Record, error) {
	body, err := fetch(ctx, p, poll, cc.have, hlc.Timestamp{})
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var recs []*ledger.Record
	for r, err := range readExport(body, nil) {
		if err != nil {
			return nil, err
		}
		if r.Poll != poll || r.Replica != cc.replica || r.Seq <= cc.have || r.Seq > cc.chain.Records {
			continue
		}
		if n := uint64(len(recs)); r.Seq != cc.have+n+1 || n > 0 && r.Prev != recs[n-1].Hash() {
			return nil, fmt.Errorf("%w: %s/%s seq %d does not follow seq %d", ledger.ErrChain, poll, cc.replica, r.Seq, cc.have+n)
		}
		recs = append(recs, &r)
	}
	if uint64(len(recs)) != cc.chain.Records-cc.have || recs[len(recs)-1].Hash() != cc.chain.Head {
		return nil, fmt.Errorf("%w: the copy of %s/%s does not end at the certified head (seq %d)", ledger.ErrChain, poll, cc.replica, cc.chain.Records)
	}
	return recs, nil
}
