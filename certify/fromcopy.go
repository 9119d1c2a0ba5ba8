package certify

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
)

// ErrUnsignedCopy is why a copy of a lost replica's chain is refused: no
// head signed with the key the replica is known by ends its records (a
// forged copy, or one stored before copies carried their heads). The
// error names the copy's holder.
var ErrUnsignedCopy = errors.New("certify: a copy its replica did not sign")

// fromCopies finds, for each replica the plan found missing because its
// node is not a live member (or refuses connections: gone.go), the live
// full node holding the longest copy of its chain (package buddy: each
// full node copies its batches to a buddy before it acknowledges them)
// that the replica itself signed: its
// records end at a chain head signed with the key the replica is known by
// (checkSigned). A replica whose copy holds every record it was known to
// hold (its gossiped count) is read from that copy instead: it joins
// replicas, peers reads it from its holder (collect checks the head
// again), and the certificate names it (api.CopySource). A shorter copy
// is taken too and judged like a short export (pending, unless
// --accept-lost). No copy at all leaves the replica missing, and so do
// copies its replica did not sign: each is logged and named, with its
// holder, in the pending reason.
func (c *Certifier) fromCopies(ctx context.Context, poll string, replicas []string, missing []api.Missing, peers map[string]Peer) ([]string, []api.Missing, []api.CopySource) {
	var still []api.Missing
	var sources []api.CopySource
	for _, m := range missing {
		holder, n, refused := c.longestCopy(ctx, poll, m.Replica, peers)
		for _, r := range refused {
			c.log.Warn("a copy of a lost replica refused: its replica did not sign it", "poll", poll, "replica", m.Replica, "holder", r.holder, "err", r.err)
		}
		if n == 0 {
			if len(refused) > 0 {
				m.Error += "; " + copyRefusals(refused)
			}
			still = append(still, m)
			continue
		}
		p := peers[holder]
		p.Name, p.Replica, p.CopyOf, p.Holder = p.Name+" (copy of "+m.Replica+")", m.Replica, m.Replica, holder
		peers[m.Replica] = p
		replicas = append(replicas, m.Replica)
		sources = append(sources, api.CopySource{Replica: m.Replica, Holder: holder, Records: n})
		c.log.Info("certifying a replica from its copy: its node is not a live member", "poll", poll, "replica", m.Replica, "holder", holder, "records", n, "expected", m.Expected,
			"why", m.Error)
	}
	slices.Sort(replicas)
	return replicas, still, sources
}

// refusal is a copy refused, and its holder.
type refusal struct {
	holder string
	err    error
}

// longestCopy asks every live full node for its copy of replica's chain
// and returns the holder of the longest one whose records continue from
// seq 1 up to a head the replica signed, and its length (0: none holds
// one), and the copies refused for want of that head.
func (c *Certifier) longestCopy(ctx context.Context, poll, replica string, peers map[string]Peer) (holder string, n uint64, refused []refusal) {
	for _, name := range slices.Sorted(maps.Keys(peers)) {
		p := peers[name]
		if !p.Full || p.CopyOf != "" || name == replica {
			continue
		}
		p.CopyOf, p.Holder = replica, name
		got, err := c.copyLength(ctx, p, poll, replica)
		if err != nil {
			refused = append(refused, refusal{name, err})
			continue
		}
		if got > n {
			holder, n = name, got
		}
	}
	return holder, n, refused
}

// copyLength reads p's copy of replica's chain and counts the records
// that continue it from seq 1 (a read error ends the count there); the
// count stands only where the replica's signed head ends it (an error
// wrapping ErrUnsignedCopy otherwise). A holder that holds no record of
// the chain, or does not answer, has none: 0 and no error.
func (c *Certifier) copyLength(ctx context.Context, p Peer, poll, replica string) (uint64, error) {
	body, err := c.fetch(ctx, p, poll, 0, hlc.Timestamp{})
	if err != nil {
		return 0, nil
	}
	defer body.Close()
	var head *ledger.SignedHead
	var n uint64
	var last ledger.Hash
	for r, err := range readExport(body, func(h *ledger.SignedHead) { head = h }) {
		if err != nil || r.Poll != poll || r.Replica != replica || r.Seq != n+1 || r.Prev != last {
			break
		}
		n, last = n+1, r.Hash()
	}
	if n == 0 {
		return 0, nil
	}
	if err := c.checkSigned(poll, replica, p.Holder, head, n, last); err != nil {
		return 0, err
	}
	return n, nil
}

// readExport reads a peer's export: the binary stream, or NDJSON; each
// signed head, once checked against its own key and the records before
// it, is passed to onHead.
func readExport(body io.Reader, onHead func(*ledger.SignedHead)) iter.Seq2[ledger.Record, error] {
	br := bufio.NewReaderSize(body, 64<<10)
	if ledger.IsStream(br) {
		return ledger.ReadStreamHeads(br, onHead)
	}
	return ledger.ReadNDJSONHeads(br, onHead)
}

// checkSigned checks a copy of replica's chain of poll read from holder:
// its n records end (the last one hashing to last) at a chain head that
// replica signed, with the key this node knows it by — the one it
// announced to the cluster, learnt from the replica itself and kept, never
// from the copy's holder. Else the copy is refused (ErrUnsignedCopy,
// naming the holder): a forged chain, however consistent, has no such
// head, and a copy an earlier release stored has none either.
func (c *Certifier) checkSigned(poll, replica, holder string, head *ledger.SignedHead, n uint64, last ledger.Hash) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: the copy held by %s: %s", ErrUnsignedCopy, holder, fmt.Sprintf(format, args...))
	}
	pub, known := c.cfg.State.Defs.PublicKey(replica)
	switch {
	case !known:
		return refuse("the key %s signs with is not known here, so its copy cannot be checked", replica)
	case head == nil:
		return refuse("%d records and no chain head signed by %s (forged, or stored by a release before copies carried their replica's heads)", n, replica)
	case head.Poll != poll || head.Replica != replica:
		return refuse("its signed head is of %s/%s", head.Poll, head.Replica)
	case !bytes.Equal(head.Pub, pub) || !head.Verify():
		return refuse("its chain head is signed by key %s, not by %s's key %s", head.KeyID(), replica, (&ledger.SignedHead{Pub: pub}).KeyID())
	case head.Seq != n || head.Hash != last:
		return refuse("its %d records do not end at the head %s signed (seq %d)", n, replica, head.Seq)
	}
	return nil
}

// copyRefusals joins refusals for a pending reason.
func copyRefusals(refused []refusal) string {
	parts := make([]string, len(refused))
	for i, r := range refused {
		parts[i] = r.err.Error()
	}
	return strings.Join(parts, "; ")
}
