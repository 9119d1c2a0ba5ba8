package certify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"tally/hlc"
	"tally/ledger"
)

// collect brings this node's copy of every replica's chain of the poll up
// to date (what the prefetch has not copied yet: all of it, for a poll that
// ran before this node did) and returns the copies, in replicas' order.
// Replicas are read at once; the first error, in replicas' order, names
// its replica.
func (c *Certifier) collect(ctx context.Context, poll string, replicas []string, peers map[string]Peer, fence hlc.Timestamp) ([][]*ledger.Record, error) {
	chains := make([][]*ledger.Record, len(replicas))
	errs := make([]error, len(replicas))
	var wg sync.WaitGroup
	for i, r := range replicas {
		wg.Go(func() {
			for try := 0; ; try++ {
				cc := c.copies.get(poll, r)
				cc.mu.Lock()
				_, err := c.topUp(ctx, cc, peers[r], false, fence)
				if err == nil {
					c.copies.feed(cc, true)
					chains[i] = cc.records()
				}
				cc.mu.Unlock()
				var stale *staleCopyError
				if errs[i] = err; try > 0 || !errors.As(err, &stale) {
					return
				}
				// The copy no longer matches the replica's chain: read it
				// whole, now.
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return chains, nil
}

// topUp extends cc with the records its replica holds beyond it: from this
// node's ledger for its own replica, else from the peer's export after the
// last seq but one the copy holds. That one must come back unchanged: a
// replica that no longer holds what was copied (restored from an older
// backup) or hands over a different chain has its copy dropped
// (*staleCopyError), and collect reads its chain whole, as an auditor
// would. A copy of a lost replica's chain (p.CopyOf) must end at a head
// the replica signed (checkSigned), or it is dropped and refused. The
// caller holds cc.mu. Every error names the replica; a panic in the fetch
// or a decoder ends with an error, not the process.
func (c *Certifier) topUp(ctx context.Context, cc *chainCopy, p Peer, bounded bool, fence hlc.Timestamp) (added int, err error) {
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("reading a replica's records panicked", "poll", cc.poll, "replica", cc.replica, "panic", v, "stack", string(debug.Stack()))
			err = &replicaError{cc.replica, fmt.Errorf("internal error: %v", v)}
		}
		if err != nil && !errors.Is(err, errBudget) {
			c.copies.drop(cc)
			if p.CopyOf != "" && !errors.Is(err, ErrUnsignedCopy) {
				err = fmt.Errorf("the copy held by %s: %w", p.Holder, err) // ErrUnsignedCopy's name it already
			}
			if len(cc.recs) > 0 && (errors.Is(err, ledger.ErrChain) || errors.Is(err, ledger.ErrConflict)) {
				err = &staleCopyError{err}
			}
			err = &replicaError{cc.replica, err}
		}
	}()
	held := uint64(len(cc.recs))
	after := max(held, 1) - 1
	var src iter.Seq2[ledger.Record, error]
	var head *ledger.SignedHead // the replica's signed head of the chain, where the export has one
	if cc.replica == c.cfg.Replica {
		if !fence.IsZero() && c.cfg.Fence != nil {
			if err := c.cfg.Fence(cc.poll, fence.Wall); err != nil {
				return 0, err
			}
		}
		src = c.cfg.Ledger.ScanAfter(cc.poll, cc.replica, after)
	} else {
		body, err := c.fetch(ctx, p, cc.poll, after, fence)
		if err != nil {
			return 0, err
		}
		defer body.Close()
		src = readExport(body, func(h *ledger.SignedHead) {
			if h.Poll == cc.poll && h.Replica == cc.replica {
				head = h
			}
		})
	}
	sawLast := held == 0
	checked := func(yield func(ledger.Record, error) bool) {
		for r, err := range src {
			if err == nil && r.Seq == held && r.Poll == cc.poll && r.Replica == cc.replica {
				sawLast = true
			}
			if !yield(r, err) {
				return
			}
		}
	}
	added, err = c.copies.extend(cc, checked, bounded)
	if err == nil && !sawLast {
		err = fmt.Errorf("%w: holds fewer than the %d records copied of it while the poll ran", ledger.ErrChain, held)
	}
	if err == nil && p.CopyOf != "" {
		var last ledger.Hash
		if len(cc.recs) > 0 {
			last = cc.recs[len(cc.recs)-1].Hash()
		}
		err = c.checkSigned(cc.poll, cc.replica, p.Holder, head, uint64(len(cc.recs)), last)
	}
	return added, err
}

// staleCopyError is a top-up that found the copy no longer matching its
// replica's chain (or the export broken): the copy is dropped, and read
// again whole.
type staleCopyError struct{ err error }

// replicaError is an error while reading one replica's records.
type replicaError struct {
	replica string
	err     error
}

// replicaOf names the replica an error is about, when it says (a broken
// chain names its poll/replica in the message itself).
func replicaOf(err error) string {
	if re, ok := errors.AsType[*replicaError](err); ok {
		return re.replica
	}
	return "(chain check)"
}

// fetch opens a peer's export (cfg.Fetch) and notes how its node
// answered (gone.go): the holder's, for a copy.
func (c *Certifier) fetch(ctx context.Context, p Peer, poll string, after uint64, fence hlc.Timestamp) (io.ReadCloser, error) {
	body, err := c.cfg.Fetch(ctx, p, poll, after, fence)
	host := p.Replica
	if p.CopyOf != "" {
		host = p.Holder
	}
	if ctx.Err() == nil {
		c.members.note(host, err)
	}
	return body, err
}

// client is the HTTP client peers are asked with.
func (c *Certifier) client() *http.Client {
	if c.cfg.Client != nil {
		return c.cfg.Client
	}
	return http.DefaultClient
}

// fetchHTTP asks a peer for its records over HTTP(S) with the cluster credential, in
// the binary stream format (NDJSON is the auditor's; both are accepted).
func (c *Certifier) fetchHTTP(ctx context.Context, p Peer, poll string, after uint64, fence hlc.Timestamp) (io.ReadCloser, error) {
	if p.HTTPAddr == "" {
		return nil, errors.New("member announces no HTTP address")
	}
	scheme := "http://"
	if p.HTTPS {
		scheme = "https://"
	}
	u := scheme + p.HTTPAddr + "/v1/polls/" + url.PathEscape(poll) + "/ledger?format=binary&after=" + strconv.FormatUint(after, 10)
	if p.CopyOf != "" {
		u += "&copy_of=" + url.QueryEscape(p.CopyOf) // a copy takes no new records: nothing to fence
	} else if !fence.IsZero() {
		u += "&fence=" + url.QueryEscape(fence.String())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(c.cfg.PeerHeader, c.cfg.PeerToken)
	res, err := c.client().Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		res.Body.Close()
		if res.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("%s answered 401: the cluster's nodes must share --gossip-key", p.Name)
		}
		return nil, fmt.Errorf("%s answered %d: %s", p.Name, res.StatusCode, strings.TrimSpace(string(b)))
	}
	return res.Body, nil
}
