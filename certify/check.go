package certify

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"tally/api"
	"tally/state"
)

// ErrShortCertificate is returned by Covers for a reconciled certificate
// that leaves out records the receiving node knows exist.
var ErrShortCertificate = errors.New("certify: certificate leaves out known records")

// ShortError is a reconciled certificate that certifies fewer records of
// a replica than the receiving node knows that replica holds, without an
// operator's decision (--exclude, --accept-lost) saying so. It wraps
// ErrShortCertificate.
type ShortError struct {
	Poll        string
	Replica     string
	Known       uint64 // records of the replica this node knows of
	Certified   uint64 // records of it the certificate covers
	Coordinator string // the node that certified (detail.coordinator)
	By          string // the replica that signed
}

func (e *ShortError) Error() string {
	return fmt.Sprintf("certificate of poll %q by %s (%s) covers %d records of replica %s; this node knows of %d",
		e.Poll, e.Coordinator, e.By, e.Certified, e.Replica, e.Known)
}

func (e *ShortError) Unwrap() error { return ErrShortCertificate }

// Covers checks a reconciled certificate against what a node knows: for
// every replica known to hold records of the poll (known: replica →
// records), the certificate must cover at least that many, unless the
// operator excluded the replica or accepted its loss. A pending
// certificate always passes (it states what is missing). A reconciled one
// whose detail does not decode fails: it cannot show what it covers.
func Covers(c state.Certificate, known map[string]uint64) error {
	if c.Status != state.Reconciled {
		return nil
	}
	var d api.ResultDetail
	if err := json.Unmarshal(c.Detail, &d); err != nil || d.Result == nil {
		return fmt.Errorf("%w: certificate of poll %q by %s carries no result to check (%v)", ErrShortCertificate, c.Poll, c.By, err)
	}
	certified := make(map[string]uint64, len(d.Result.Replicas))
	for _, ch := range d.Result.Replicas {
		certified[ch.Replica] = ch.Records
	}
	decided := func(r string) bool {
		return slices.ContainsFunc(d.Excluded, func(e api.Exclusion) bool { return e.Replica == r }) ||
			slices.ContainsFunc(d.Lost, func(l api.Lost) bool { return l.Replica == r })
	}
	for _, r := range slices.Sorted(maps.Keys(known)) { // the first short replica by name: the same error every time
		if n := known[r]; n > 0 && certified[r] < n && !decided(r) {
			return &ShortError{Poll: c.Poll, Replica: r, Known: n, Certified: certified[r], Coordinator: d.Coordinator, By: c.By}
		}
	}
	return nil
}

// Check is Covers against this node's knowledge of the poll: the record
// counts gossiped and kept across restarts, and its own ledger. The node
// applies a certificate received from another node only when it passes.
func (c *Certifier) Check(cert state.Certificate) error {
	known, err := c.cfg.State.KnownRecords(cert.Poll)
	if err != nil {
		return nil // a poll this node does not hold: PutCertificate refuses it anyway
	}
	if c.cfg.Full {
		if n := c.localCount(cert.Poll); n > known[c.cfg.Replica] {
			known[c.cfg.Replica] = n
		}
	}
	return Covers(cert, known)
}

// recheckEvery is how often the certificates this node holds are checked
// again against what it knows (recheck).
const recheckEvery = 5 * time.Second

// recheck withdraws every reconciled certificate this node holds that
// Check refuses: one this node or an earlier version wrote, or took
// before it knew better, from a partial view. The poll is then certified
// again here (or takes a complete certificate from another node). A
// certificate is checked again only when the record counts known of its
// poll have changed since it passed.
func (c *Certifier) recheck(passed map[string]uint64) {
	if c.cfg.Synced != nil && !c.cfg.Synced() {
		return
	}
	for _, d := range c.cfg.State.Defs.Polls() {
		cert, ok := c.cfg.State.Defs.Certificate(d.ID)
		if !ok || cert.Status != state.Reconciled {
			continue
		}
		known, err := c.cfg.State.KnownRecords(d.ID)
		if err != nil {
			continue
		}
		var sum uint64
		for _, n := range known {
			sum += n
		}
		if n, ok := passed[d.ID]; ok && n == sum {
			continue
		}
		err = c.Check(cert)
		if err == nil {
			passed[d.ID] = sum
			continue
		}
		if withdrawn, werr := c.cfg.State.Defs.WithdrawCertificate(d.ID); werr != nil || !withdrawn {
			continue
		}
		delete(passed, d.ID)
		c.mu.Lock()
		delete(c.dueSince, d.ID)
		delete(c.lastTry, d.ID)
		c.mu.Unlock()
		c.attempts.WithLabelValues("withdrawn").Inc()
		c.log.Error("withdrew a certificate this node held that leaves out records it knows of; certifying the poll again", "poll", d.ID, "err", err)
	}
}
