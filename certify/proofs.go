package certify

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
	"tally/merkle"
	"tally/receipt"
	"tally/state"
)

// A voter's proof (GET /v1/polls/{poll}/proofs/{leaf}) is read from the
// index of a certified poll's tree: the records in the tree's order, what
// became of each (ledger.DisposeChains) and the tree. The certifier
// builds it from the chains it certified; any other full node from the
// chains it reads back from the replicas (or their buddies' copies),
// each checked against the certified head, and the root against the
// certificate's: a node answers no proof of a tree other than the one
// certified. The last few polls asked are kept (about 300 bytes a
// record: the records themselves, 64 for the tree, 40 for the leaf's
// place).

// keptIndexes is how many polls' indexes a node keeps.
const keptIndexes = 2

// proofIndex is one certified poll's tree and its records.
type proofIndex struct {
	head   receipt.TreeHead
	cert   hlc.Timestamp // the certificate it was built for
	disp   *ledger.Disposed
	tree   *merkle.Tree
	leaves map[merkle.Hash]uint32 // leaf → index
}

// treeOf is the tree over the records a result was reconciled from, in
// the certificate's order (res.Replicas: by replica, each chain by seq),
// each leaf a record's hash and what the result made of it: what
// certification signs the head of. The chains were checked by the
// reconcile; each must still be the one the result names (its length,
// its seqs, its head), or no tree is made.
func treeOf(chains [][]*ledger.Record, res *ledger.Result) (*merkle.Tree, error) {
	byReplica := make(map[string][]*ledger.Record, len(chains))
	for _, recs := range chains {
		if len(recs) > 0 {
			byReplica[recs[0].Replica] = recs
		}
	}
	var n int
	for _, ch := range res.Replicas {
		n += int(ch.Records)
	}
	leaves := make([]merkle.Leaf, n)
	off := 0
	for _, ch := range res.Replicas {
		recs, disp := byReplica[ch.Replica], res.Dispositions(ch.Replica)
		if uint64(len(recs)) != ch.Records || len(disp) != len(recs) || recs[len(recs)-1].KeepHash() != ch.Head {
			return nil, fmt.Errorf("certify: the chain of %s read is not the one the result counts (%d records)", ch.Replica, ch.Records)
		}
		if err := chainLeaves(leaves[off:off+len(recs)], recs, disp); err != nil {
			return nil, err
		}
		off += len(recs)
	}
	return merkle.New(leaves), nil
}

// chainLeaves fills in the leaves of one chain's records, on every core.
func chainLeaves(leaves []merkle.Leaf, recs []*ledger.Record, disp []ledger.Disposition) error {
	parts := min(8, max(len(recs)/4096, 1))
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			for i := p * len(recs) / parts; i < (p+1)*len(recs)/parts; i++ {
				r := recs[i]
				if r.Seq != uint64(i)+1 || disp[i] == 0 {
					errs[p] = fmt.Errorf("certify: record %s/%d out of its place, or not disposed", r.Replica, r.Seq)
					return
				}
				leaves[i] = merkle.LeafOf(r.KeepHash(), byte(disp[i]))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// leavesOf is the tree's leaves of disposed records.
func leavesOf(d *ledger.Disposed) []merkle.Leaf {
	hashes := recordHashes(d.Records)
	leaves := make([]merkle.Leaf, len(hashes))
	for i, h := range hashes {
		leaves[i] = merkle.LeafOf(h, byte(d.Of[i]))
	}
	return leaves
}

// recordHashes is the records' hashes, computed on every core and kept
// in the records (ledger.Record.KeepHash: they do not change).
func recordHashes(recs []*ledger.Record) []merkle.Hash {
	out := make([]merkle.Hash, len(recs))
	parts := 8
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			for i := p * len(recs) / parts; i < (p+1)*len(recs)/parts; i++ {
				out[i] = recs[i].KeepHash()
			}
		})
	}
	wg.Wait()
	return out
}

// signTreeHead is the signed head of the tree over the chains a result
// was reconciled from.
func (c *Certifier) signTreeHead(poll string, chains [][]*ledger.Record, res *ledger.Result) (*receipt.TreeHead, error) {
	tree, err := treeOf(chains, res)
	if err != nil {
		return nil, err
	}
	if tree.Size() != res.Records {
		return nil, fmt.Errorf("certify: a tree of %d records over a result of %d", tree.Size(), res.Records)
	}
	root := tree.Root()
	h := &receipt.TreeHead{Poll: poll, Size: tree.Size(), Root: hex.EncodeToString(root[:]), Digest: res.Digest, By: c.cfg.Replica}
	if c.cfg.Sign != nil {
		h.Sig = c.cfg.Sign(h.SigningBytes())
	}
	return h, nil
}

// buildIndex indexes the chains a poll was certified from, checking them
// against the certificate: the rules it was certified under (its close,
// counting rule and this cluster's trust floor, which certificates do not
// state) give each record's disposition, and they must add up to its
// counts; the tree's root must be the signed head's.
func buildIndex(poll string, cert state.Certificate, head receipt.TreeHead, trustFloor float64, chains [][]*ledger.Record) (*proofIndex, error) {
	var detail api.ResultDetail
	if err := json.Unmarshal(cert.Detail, &detail); err != nil || detail.Result == nil {
		return nil, fmt.Errorf("certify: the certificate of %q holds no result", poll)
	}
	res := detail.Result
	d, err := ledger.DisposeChains(ledger.ReconcileConfig{Poll: poll, ClosesAt: res.ClosesAt, CloseRule: res.CloseRule,
		TrustFloor: trustFloor, FirstWins: res.FirstWins}, chains...)
	if err != nil {
		return nil, err
	}
	if err := sameCounts(d, res); err != nil {
		return nil, fmt.Errorf("certify: the records read of %q: %w", poll, err)
	}
	tree := merkle.New(leavesOf(d))
	if root := tree.Root(); hex.EncodeToString(root[:]) != head.Root || tree.Size() != head.Size {
		return nil, fmt.Errorf("%w: the records read of %q make a tree of %d with root %x, the certificate's is of %d with root %s",
			ErrIndex, poll, tree.Size(), root, head.Size, head.Root)
	}
	idx := &proofIndex{head: head, cert: cert.TS, disp: d, tree: tree, leaves: make(map[merkle.Hash]uint32, len(d.Records))}
	for i, r := range d.Records {
		idx.leaves[r.KeepHash()] = uint32(i)
	}
	return idx, nil
}

// proof is the proof of the record at index i; with its tree head when
// top, and the record its disposition points at (the same voter's).
func (idx *proofIndex) proof(i int, top bool) (*receipt.Proof, error) {
	r := idx.disp.Records[i]
	path, err := idx.tree.Proof(uint64(i))
	if err != nil {
		return nil, err
	}
	leaf := r.KeepHash()
	p := &receipt.Proof{Leaf: hex.EncodeToString(leaf[:]), Index: uint64(i), Record: r.AppendBinary(nil), Vote: receipt.VoteOf(r),
		Disposition: dispositionWord[idx.disp.Of[i]]}
	for _, h := range path {
		p.Path = append(p.Path, hex.EncodeToString(h[:]))
	}
	if !top {
		return p, nil
	}
	head := idx.head
	p.TreeHead = &head
	if o := idx.disp.Other[i]; o >= 0 && idx.disp.Records[o].Voter == r.Voter { // never another voter's record
		if p.Counted, err = idx.proof(o, false); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// dispositionWord is each disposition as a proof says it.
var dispositionWord = map[ledger.Disposition]string{
	ledger.DispCounted:    receipt.Counted,
	ledger.DispSuperseded: receipt.Superseded,
	ledger.DispLate:       receipt.Late,
	ledger.DispShadowed:   receipt.Filtered,
	ledger.DispDuplicate:  receipt.Duplicate,
}

// ProofAnswer is the answer to GET /v1/polls/{poll}/proofs/{leaf}: its
// HTTP status and JSON body (an error's too), for an edge's relayed
// request (the edge says Retry-After: 1 on a 503).
func (c *Certifier) ProofAnswer(ctx context.Context, poll, leaf string, admin bool) (status int, body []byte) {
	status, _, body = answerOf(c.proofOf(ctx, poll, leaf, admin))
	return status, body
}

// HandleProof serves GET /v1/polls/{poll}/proofs/{leaf}.
func (c *Certifier) HandleProof(w http.ResponseWriter, r *http.Request) {
	status, retry, body := answerOf(c.proofOf(r.Context(), r.PathValue("poll"), r.PathValue("leaf"), api.IsAdmin(r)))
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusOK {
		w.Header().Set("Cache-Control", "public, max-age=60") // a certified poll's proof does not change
	}
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(int(retry/time.Second), 1)))
	}
	w.WriteHeader(status)
	w.Write(body)
}

// answerOf is a proof's answer, or an error's (*api.Error, else 503):
// the status, how long to wait before asking again (0: no need) and the
// JSON body.
func answerOf(p *receipt.Proof, err error) (status int, retry time.Duration, body []byte) {
	if err != nil {
		var e *api.Error
		if !errors.As(err, &e) {
			e = api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "%v", err)
			e.RetryAfter = time.Second
		}
		var eb api.ErrorBody
		eb.Error.Code, eb.Error.Message = e.Code, e.Message
		body, _ = json.Marshal(eb) // strings only
		return e.Status, e.RetryAfter, append(body, '\n')
	}
	body, err = json.Marshal(p)
	if err != nil {
		return http.StatusInternalServerError, 0, []byte(`{"error":{"code":"internal","message":"cannot encode the proof"}}` + "\n")
	}
	return http.StatusOK, 0, append(body, '\n')
}

// proofOf is the proof of the record whose hash is leaf, in the poll's
// certified tree; errors are *api.Error.
func (c *Certifier) proofOf(ctx context.Context, poll, leaf string, admin bool) (p *receipt.Proof, err error) {
	defer func() {
		if c.proofsM != nil {
			c.proofsM.WithLabelValues(proofOutcome(err)).Inc()
		}
	}()
	var want merkle.Hash
	if len(leaf) != 2*len(want) || strings.ToLower(leaf) != leaf {
		return nil, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "a leaf is 64 lowercase hex digits: the receipt's \"leaf\"")
	}
	if _, err := hex.Decode(want[:], []byte(leaf)); err != nil {
		return nil, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "a leaf is 64 lowercase hex digits: the receipt's \"leaf\"")
	}
	def, ok := c.cfg.State.Defs.Poll(poll)
	if !ok || def.Withheld(c.cfg.Now().UnixMilli()) && !admin {
		return nil, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", poll)
	}
	if def.Hidden && !admin {
		return nil, api.Errorf(http.StatusForbidden, api.CodeResultHidden, "the host has not revealed poll %q's result yet", poll)
	}
	cert, ok := c.cfg.State.Defs.Certificate(poll)
	if !ok || cert.Status != state.Reconciled {
		now, why := c.cfg.Now().UnixMilli(), "it is not certified yet"
		switch {
		case def.ClosesAt == 0 || now < def.ClosesAt:
			why = "it is open"
		case now < def.GraceEnd():
			why = "it closed and is in its grace window, which ends at " + time.UnixMilli(def.GraceEnd()).UTC().Format(time.RFC3339)
		case ok && cert.Reason != "":
			why = "its certification is pending: " + cert.Reason
		}
		return nil, api.Errorf(http.StatusConflict, api.CodeNotCertified, "poll %q has no certified result to prove a vote in: %s", poll, why)
	}
	head, err := treeHeadOf(cert)
	if err != nil {
		return nil, err
	}
	idx, err := c.proofs.index(ctx, poll, cert, *head, c.cfg.TrustFloor, func(ctx context.Context) ([][]*ledger.Record, error) {
		return c.readCertifiedChains(ctx, poll, cert)
	})
	if errors.Is(err, ErrProofsBusy) {
		e := api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "this node is serving the proofs of other polls now (%v): ask again in a minute, or ask another node", err)
		e.RetryAfter = 30 * time.Second
		return nil, e
	}
	if err != nil {
		c.log.Warn("cannot index a certified poll's records for a proof", "poll", poll, "err", err)
		e := api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "this node cannot read poll %q's certified records now (%v): ask again, or ask another node", poll, err)
		e.RetryAfter = time.Second
		return nil, e
	}
	i, ok := idx.leaves[want]
	if !ok {
		return nil, api.Errorf(http.StatusNotFound, api.CodeLeafNotFound, "no record of poll %q's certified result has the hash %s", poll, leaf)
	}
	c.proofs.hit(poll)
	return idx.proof(int(i), true)
}

// proofOutcome is a proof's outcome as tally_proofs_total counts it.
func proofOutcome(err error) string {
	var e *api.Error
	switch {
	case err == nil:
		return "proved"
	case !errors.As(err, &e):
		return "unavailable"
	case e.Code == api.CodeLeafNotFound:
		return "leaf_not_found"
	case e.Code == api.CodeNotCertified:
		return "not_certified"
	case e.Code == api.CodeInvalidRequest:
		return "invalid"
	case e.Status == http.StatusServiceUnavailable:
		return "unavailable"
	}
	return "refused"
}

// treeHeadOf is a reconciled certificate's tree head; a certificate of a
// release before v0.6.0 has none, and no vote of it can be proved.
func treeHeadOf(cert state.Certificate) (*receipt.TreeHead, error) {
	var d api.ResultDetail
	if err := json.Unmarshal(cert.Detail, &d); err != nil || d.Tree == nil || d.Tree.Check() != nil {
		return nil, api.Errorf(http.StatusConflict, api.CodeNotCertified,
			"poll %q was certified by a release before v0.6.0 (certified at %s by %s): its certificate has no tree to prove a vote in; its result stands, checked by the auditor's merge",
			cert.Poll, time.UnixMilli(cert.TS.Wall).UTC().Format(time.RFC3339), cert.By)
	}
	return d.Tree, nil
}

// readCertifiedChains reads back every chain the certificate counts, each
// up to its certified head: this replica's from its ledger, another's
// from its node or, when that fails, from any full node's copy of it.
func (c *Certifier) readCertifiedChains(ctx context.Context, poll string, cert state.Certificate) ([][]*ledger.Record, error) {
	var d api.ResultDetail
	if err := json.Unmarshal(cert.Detail, &d); err != nil || d.Result == nil {
		return nil, fmt.Errorf("the certificate holds no result")
	}
	peers := c.members.live()
	chains := make([][]*ledger.Record, len(d.Result.Replicas))
	errs := make([]error, len(d.Result.Replicas))
	var wg sync.WaitGroup
	for i, ch := range d.Result.Replicas {
		wg.Go(func() { chains[i], errs[i] = c.readChain(ctx, poll, ch, peers) })
	}
	wg.Wait()
	return chains, errors.Join(errs...)
}

// readChain reads one certified chain: from this node's ledger, from its
// replica's node, then from a full node's copy of it.
func (c *Certifier) readChain(ctx context.Context, poll string, ch ledger.Chain, peers []Peer) ([]*ledger.Record, error) {
	cc := copiedChain{replica: ch.Replica, chain: ch}
	if ch.Replica == c.cfg.Replica {
		var recs []*ledger.Record
		for r, err := range c.cfg.Ledger.ScanAfter(poll, ch.Replica, 0) {
			if err != nil {
				return nil, err
			}
			if r.Seq > ch.Records {
				break
			}
			recs = append(recs, &r)
		}
		if uint64(len(recs)) == ch.Records && len(recs) > 0 && recs[len(recs)-1].Hash() == ch.Head {
			return recs, nil
		}
	}
	var errs []error
	for _, p := range holdersFirst(peers, ch.Replica) {
		if p.Replica != ch.Replica {
			p.CopyOf, p.Holder = ch.Replica, p.Replica
		}
		recs, err := readCertified(ctx, c.fetch, p, poll, cc)
		if err == nil {
			return recs, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", p.Replica, err))
	}
	return nil, fmt.Errorf("replica %s's chain (%d records): %w", ch.Replica, ch.Records, errors.Join(errs...))
}

// sameCounts checks that the dispositions add up to the certified
// result: the same counted votes of each option, the same superseded,
// late, shadowed and duplicate records.
func sameCounts(d *ledger.Disposed, res *ledger.Result) error {
	n := map[ledger.Disposition]uint64{}
	totals := map[string]uint64{}
	for i, r := range d.Records {
		n[d.Of[i]]++
		if d.Of[i] == ledger.DispCounted {
			totals[r.Option]++
		}
	}
	if uint64(len(d.Records)) != res.Records || n[ledger.DispCounted] != res.Total || n[ledger.DispSuperseded] != res.Superseded ||
		n[ledger.DispLate] != res.Late || n[ledger.DispShadowed] != res.Shadowed || n[ledger.DispDuplicate] != res.Duplicates || !maps.Equal(totals, res.Totals) {
		return fmt.Errorf("%w: they add up to %d records, %d counted %v, %d superseded, %d late, %d filtered, %d duplicates; the certificate says %d, %d %v, %d, %d, %d, %d (is --trust-floor the certifier's?)",
			ErrIndex, len(d.Records), n[ledger.DispCounted], totals, n[ledger.DispSuperseded], n[ledger.DispLate], n[ledger.DispShadowed], n[ledger.DispDuplicate],
			res.Records, res.Total, res.Totals, res.Superseded, res.Late, res.Shadowed, res.Duplicates)
	}
	return nil
}

// ErrIndex is a certified poll's records, as read back, that do not make
// the certified result: no proof is answered from them.
var ErrIndex = errors.New("certify: the records do not make the certified result")
