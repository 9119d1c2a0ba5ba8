package state

import (
	"encoding/json"
	"fmt"

	"tally/ledger"
)

// Certificate is a poll's certificate as the state replicates it
// (ledger.Certificate): one per poll, the one that beats the others.
type Certificate = ledger.Certificate

// Certificate statuses.
const (
	Pending    = ledger.Pending
	Reconciled = ledger.Reconciled
)

// beats reports whether c should replace held: a reconciled certificate
// beats any pending one and, once held, is final (of two reconciled ones
// the earlier stands: both are the same pure function of the ledgers
// unless an operator decided, and then the first decision holds); of two
// pending ones the newer stands.
func beats(c, held *Certificate) bool {
	switch {
	case held == nil:
		return true
	case held.Status == Reconciled:
		return c.Status == Reconciled && c.TS.Less(held.TS)
	case c.Status == Reconciled:
		return true
	default:
		return held.TS.Less(c.TS)
	}
}

const certPrefix = "cert/"

// PutCertificate keeps c if it beats the certificate held for its poll,
// persisting it first, and reports whether it did.
func (d *Definitions) PutCertificate(c Certificate) (bool, error) {
	if err := c.Validate(); err != nil {
		return false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.defs.Get(c.Poll); !ok {
		return false, fmt.Errorf("certificate for unknown poll %q", c.Poll)
	}
	held := d.certs[c.Poll]
	if !beats(&c, held) {
		return false, nil
	}
	if d.store != nil {
		b, err := json.Marshal(c)
		if err != nil {
			return false, fmt.Errorf("%w: %w", ErrStore, err)
		}
		if err := d.store.PutMeta(certPrefix+c.Poll, b); err != nil {
			return false, fmt.Errorf("%w: %w", ErrStore, err)
		}
	}
	if d.certs == nil {
		d.certs = make(map[string]*Certificate)
	}
	d.certs[c.Poll] = &c
	return true, nil
}

// Certificate returns the poll's certificate, if any.
func (d *Definitions) Certificate(pollID string) (Certificate, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	c, ok := d.certs[pollID]
	if !ok {
		return Certificate{}, false
	}
	return *c, true
}

// loadCertificates reads the persisted certificates. Callers hold no lock.
func (d *Definitions) loadCertificates() error {
	for name, value := range d.store.MetaWithPrefix(certPrefix) {
		var c Certificate
		if err := json.Unmarshal(value, &c); err != nil {
			return fmt.Errorf("%w: cannot decode %s: %w", ErrStore, name, err)
		}
		if _, gone := d.forgotten[c.Poll]; gone {
			continue // kept on disk, not in memory
		}
		if d.certs == nil {
			d.certs = make(map[string]*Certificate)
		}
		d.certs[c.Poll] = &c
	}
	return nil
}

// WithdrawCertificate drops the poll's certificate from memory and from the
// Store (where the Store can delete), so that the poll is certified again.
// The node calls it for a reconciled certificate it holds that leaves out
// records it knows of — one written by an earlier version from a partial
// view — which would otherwise stand for good (a reconciled certificate is
// final). It reports whether there was one.
func (d *Definitions) WithdrawCertificate(pollID string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.certs[pollID]; !ok {
		return false, nil
	}
	if del, ok := d.store.(interface{ DeleteMetaRange(from, to string) error }); ok {
		if err := del.DeleteMetaRange(certPrefix+pollID, certPrefix+pollID+"\x00"); err != nil {
			return false, fmt.Errorf("%w: %w", ErrStore, err)
		}
	}
	delete(d.certs, pollID)
	return true, nil
}
