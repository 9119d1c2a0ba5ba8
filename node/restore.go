package node

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"tally/crdt"
	"tally/gossip"
	"tally/ingest"
	"tally/internal/backup"
	"tally/internal/buildinfo"
	"tally/ledger"
	"tally/state"
)

// A node restored from a backup (tally ledger restore) holds its
// replica's chains only up to the backup; the votes it acknowledged after
// it are on its buddy, each fsynced there before its ack (package buddy,
// docs/operations.md "Two machines"). Before it turns ready, such a node
// makes its chains whole again from those copies: once it has heard the
// cluster (the record counts its replica gossiped), it asks every live
// full member for its copy of each poll's chain past its own head
// (?copy_of=REPLICA&after=N, with the cluster credential), checks that
// each record continues its chain and that the copy ends at a head signed
// with its own key, imports the longest one, and applies its ballots to
// the state so that the counters show exactly what the ballots make the
// replica count (nothing on air moves: the other nodes hold these votes
// already). A chain the cluster says is longer than anything a copy holds
// keeps the node unready — 503 naming the gap and the way out, logged —
// and it asks again every restoreRetry: a copy's holder that comes back
// completes it. It never takes a vote whose sequence number a lost record
// had, and never certifies from a chain a restore left short.

// restoreMark is the ledger metadata entry that says the ledger was put
// in place from a backup (restoreMarkValue): tally ledger restore writes
// it with Whole false (cmd/tally/backup.go, which cannot import this
// package, spells the name and the fields again), and the node sets Whole
// once its chains hold every record its replica acknowledged.
const restoreMark = "node/restored"

// restoreMarkValue is restoreMark's value, JSON.
type restoreMarkValue struct {
	BackupTakenAt int64 `json:"backup_taken_at"` // Unix ms, the backup's manifest
	RestoredAt    int64 `json:"restored_at"`     // Unix ms, when tally ledger restore ran
	Whole         bool  `json:"whole"`
	CompletedAt   int64 `json:"completed_at,omitempty"` // Unix ms, when Whole was set
	Completed     int   `json:"completed,omitempty"`    // records imported from copies
}

// restoreBallotsWait bounds how long a restored node waits for the other
// replicas' ballots (gossip's catch-up) before it completes its chains,
// when --catch-up-wait is shorter: the counters it sets from the ballots
// would otherwise count votes that a ballot it has not heard of yet moved
// elsewhere, and fall back when it arrives.
const restoreBallotsWait = 10 * time.Second

// restoreRetry is how often a restored node short of records asks the
// copies again.
const restoreRetry = 2 * time.Second

// copyTimeout bounds one request for a copy.
const copyTimeout = 30 * time.Second

// maxCompletion bounds the records one copy may add to one chain: they
// are held in memory (a few hundred bytes each) until the copy's signed
// head has vouched for them, then imported.
const maxCompletion = 1 << 21

// restoring is a node's completion of its chains after a restore.
type restoring struct {
	n    *Node                  // set by start
	open atomic.Bool            // the chains may be short: not ready, no certifying, until whole
	why  atomic.Pointer[string] // why the node is not ready yet; nil: no gap known
	// Used by readyOnceRegained's goroutine only.
	next time.Time // when to ask the copies again
	said string    // the last reason logged
}

// reason is why a restored node is not ready yet, or "".
func (r *restoring) reason() string {
	if p := r.why.Load(); p != nil {
		return *p
	}
	return ""
}

// chainGap is a chain of this replica shorter than the cluster says.
type chainGap struct {
	poll          string
	held, acked   uint64
	holders, none []string // full members asked: what they answered
}

// start reads, at n's start, whether its replica may hold fewer records
// than it acknowledged — restored and not made whole yet, or a poll whose
// kept record count is above its chain — and keeps the answer.
func (r *restoring) start(n *Node) bool {
	r.n = n
	mark, err := readRestoreMark(n.ledger)
	if err != nil {
		n.log.Error("cannot read the restore mark; completing the chains from their copies to be safe", "err", err)
	}
	open := n.edge == nil && (err != nil || mark != nil && !mark.Whole || len(knownGaps(n.state)) > 0)
	r.open.Store(open)
	return open
}

// readRestoreMark returns the restore mark, or nil when the ledger was
// never restored.
func readRestoreMark(l *ledger.Ledger) (*restoreMarkValue, error) {
	b, found, err := l.Meta(restoreMark)
	if err != nil || !found {
		return nil, err
	}
	var v restoreMarkValue
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("node: restore mark: %w", err)
	}
	return &v, nil
}

// knownGaps lists the polls whose record count of this replica, as the
// cluster gossiped it (or the tallies kept last), is above its chain.
func knownGaps(st *state.State) []chainGap {
	var gaps []chainGap
	for _, d := range st.Defs.Polls() {
		if held, acked, err := st.OwnRecords(d.ID); err == nil && acked > held {
			gaps = append(gaps, chainGap{poll: d.ID, held: held, acked: acked})
		}
	}
	return gaps
}

// whole reports whether this replica's chains hold every record it
// acknowledged, completing them from their copies first where it knows
// (or, restored, cannot rule out) that they do not. readyOnceRegained
// calls it once the node holds the other replicas' state again, until it
// says true; the node turns ready then.
func (r *restoring) whole(ctx context.Context) bool {
	n := r.n
	if !r.open.Load() && (n.edge != nil || len(knownGaps(n.state)) == 0) {
		return true // the usual start
	}
	r.open.Store(true) // a gap that gossip showed at this start: completed alike
	if n.cfg.clustered() && !n.gossip.Synced() {
		r.say("restored from a backup: waiting to hear from the cluster how many records this replica acknowledged after it (no member has answered yet: check --join and --gossip-key)", false)
		return false
	}
	if !n.gossip.CaughtUp() && sinceStart(n) < max(n.cfg.CatchUpWait, restoreBallotsWait) {
		r.say("restored from a backup: waiting for the other replicas' ballots before completing its chains from their copies", false)
		return false
	}
	if time.Now().Before(r.next) {
		return false
	}
	began := time.Now()
	added, gaps, err := r.complete(ctx)
	if ctx.Err() != nil {
		return false
	}
	if err == nil && len(gaps) == 0 {
		err = r.markWhole(added)
	}
	if err != nil || len(gaps) > 0 {
		why := gapReason(n.replica, gaps)
		if err != nil {
			why = "restored from a backup: " + err.Error()
		}
		r.next = time.Now().Add(restoreRetry)
		r.say(why, true)
		return false
	}
	n.log.Info("restored replica whole: its chains hold every record it acknowledged; taking votes", "replica", n.replica,
		"completed_from_copies", added, "completion_took", time.Since(began).Round(time.Millisecond), "since_start", sinceStart(n).Round(time.Millisecond))
	if !n.cfg.clustered() {
		n.log.Warn("a single node restored from a backup: the votes it acknowledged after the backup are lost (no second machine held a copy)", "replica", n.replica)
	}
	r.why.Store(nil)
	r.open.Store(false)
	return true
}

// say sets why the node is not ready, and logs it when it changed (as a
// warning when warn is set).
func (r *restoring) say(why string, warn bool) {
	n := r.n
	r.why.Store(&why)
	if why == r.said {
		return
	}
	r.said = why
	if warn {
		n.log.Warn("not ready: "+why, "replica", n.replica, "retry_every", restoreRetry)
	} else {
		n.log.Info("not ready: "+why, "replica", n.replica)
	}
}

// gapReason says which chains stay short, what the copies' holders
// answered, and what to do.
func gapReason(replica string, gaps []chainGap) string {
	var b strings.Builder
	b.WriteString("restored from a backup and short of records it acknowledged, which no copy this node can reach holds:")
	for _, g := range gaps {
		asked := append(slices.Clone(g.holders), g.none...)
		fmt.Fprintf(&b, " poll %s: replica %s acknowledged %d records and holds %d (seq %d to %d missing; copies asked: %s);",
			g.poll, replica, g.acked, g.held, g.held+1, g.acked, cmp.Or(strings.Join(asked, ", "), "no other full node is a member"))
	}
	fmt.Fprintf(&b, " it takes no votes and serves nothing until a copy answers (it asks again every %s): bring back the node that holds its copy (its buddy);"+
		" if every copy is gone too, stop this node for good and start a replacement on an empty data dir (docs/operations.md, \"Backups and restore\")", restoreRetry)
	return b.String()
}

// markWhole records in the ledger that the restored chains are whole:
// the next start is an ordinary one.
func (r *restoring) markWhole(added int) error {
	mark, err := readRestoreMark(r.n.ledger)
	switch {
	case err == nil && mark == nil:
		return nil // never restored by the command: a gap gossip showed, filled
	case err != nil:
		r.n.log.Warn("the restore mark did not read; writing it again, whole", "err", err)
		mark = &restoreMarkValue{}
	}
	mark.Whole, mark.CompletedAt, mark.Completed = true, time.Now().UnixMilli(), added
	b, err := json.Marshal(mark)
	if err == nil {
		err = r.n.ledger.PutMeta(restoreMark, b)
	}
	if err != nil {
		return fmt.Errorf("node: cannot mark the restored ledger whole: %w", err)
	}
	return nil
}

// complete completes every poll's chain of this replica from the
// longest signed copy the live full members serve past its head. It
// returns the records imported and the chains still short of what the
// cluster says the replica acknowledged.
func (r *restoring) complete(ctx context.Context) (added int, gaps []chainGap, err error) {
	n := r.n
	pub, ok := n.state.Defs.PublicKey(n.replica)
	if !ok {
		return 0, nil, fmt.Errorf("node: restore: this replica's own key is not known")
	}
	f := copyFetcher{n: n, pub: pub, holders: copyHolders(n.gossip.Members(), n.replica, n.cfg.Region)}
	if len(n.peerTokens) > 0 {
		f.token, f.client = n.peerTokens[0], n.peerClient()
		defer f.client.CloseIdleConnections()
	}
	for _, d := range n.state.Defs.Polls() {
		got, gap, err := f.complete(ctx, d.ID)
		added += got
		if err != nil {
			return added, nil, err
		}
		if gap != nil {
			gaps = append(gaps, *gap)
		}
	}
	return added, gaps, nil
}

// copyHolders are the live full members but this node (of replica, in
// region) that may hold a copy of its chains: its own region's first
// (its buddy is among them when the region has another full node), by
// name.
func copyHolders(members []gossip.Member, replica, region string) []gossip.Member {
	var out []gossip.Member
	for _, m := range members {
		if m.Role == gossip.RoleFull && !m.Self && m.Replica != replica && m.HTTPAddr != "" {
			out = append(out, m)
		}
	}
	elsewhere := func(m gossip.Member) int {
		if m.Region == region {
			return 0
		}
		return 1
	}
	slices.SortFunc(out, func(a, b gossip.Member) int {
		return cmp.Or(cmp.Compare(elsewhere(a), elsewhere(b)), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// copyFetcher asks the holders for copies of this replica's chains.
type copyFetcher struct {
	n       *Node
	pub     ed25519.PublicKey // this replica's: a copy must end at a head it signed
	holders []gossip.Member
	client  *http.Client
	token   string // the cluster credential
}

// complete completes one poll's chain from the longest copy past its
// head, and returns the records imported and the gap left, if any.
func (f *copyFetcher) complete(ctx context.Context, poll string) (int, *chainGap, error) {
	n := f.n
	held, last, err := n.ledger.Head(poll, n.replica)
	if err != nil {
		return 0, nil, fmt.Errorf("node: restore: %w", err)
	}
	gap := chainGap{poll: poll}
	var best []ledger.Record
	for _, m := range f.holders {
		recs, err := f.fetch(ctx, m, poll, held, last)
		switch {
		case err != nil:
			gap.holders = append(gap.holders, fmt.Sprintf("%s: %v", m.Name, err))
		case len(recs) == 0:
			gap.none = append(gap.none, m.Name+": holds none past seq "+strconv.FormatUint(held, 10))
		default:
			gap.holders = append(gap.holders, fmt.Sprintf("%s: holds to seq %d", m.Name, held+uint64(len(recs))))
			if len(recs) > len(best) {
				best = recs
			}
		}
	}
	if len(best) > 0 {
		if err := f.apply(poll, best); err != nil {
			return 0, nil, err
		}
		n.log.Info("restored chain completed from its copy", "poll", poll, "from_seq", held+1, "to_seq", held+uint64(len(best)), "holders", gap.holders)
	}
	gap.held = held + uint64(len(best))
	if _, acked, err := n.state.OwnRecords(poll); err == nil && acked > gap.held {
		gap.acked = acked
		return len(best), &gap, nil
	}
	return len(best), nil, nil
}

// fetch reads member m's copy of this replica's chain of poll past seq
// after (whose record hashes to prev): none (nil) when m holds none
// (404: it keeps no copies, or has no such poll), else the records, each
// continuing the chain, up to the head this replica signed.
func (f *copyFetcher) fetch(ctx context.Context, m gossip.Member, poll string, after uint64, prev ledger.Hash) ([]ledger.Record, error) {
	if f.client == nil {
		return nil, errors.New("no cluster credential (no --gossip-key)")
	}
	ctx, cancel := context.WithTimeout(ctx, copyTimeout)
	defer cancel()
	scheme := "http://"
	if m.HTTPS {
		scheme = "https://"
	}
	u := scheme + m.HTTPAddr + "/v1/polls/" + url.PathEscape(poll) + "/ledger?format=binary&copy_of=" +
		url.QueryEscape(f.n.replica) + "&after=" + strconv.FormatUint(after, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(PeerHeader, f.token)
	res, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	switch res.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, nil
	default:
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return nil, fmt.Errorf("answered %d: %s", res.StatusCode, strings.TrimSpace(string(b)))
	}
	return readCopy(res.Body, poll, f.n.replica, f.pub, after, prev)
}

// readCopy reads a copy of replica's chain of poll in the binary stream:
// records after seq after (whose record hashes to prev), each the next of
// the chain, ending at a head signed with pub. It checks it all before
// returning anything.
func readCopy(body io.Reader, poll, replica string, pub ed25519.PublicKey, after uint64, prev ledger.Hash) ([]ledger.Record, error) {
	var head *ledger.SignedHead
	var recs []ledger.Record
	onHead := func(h *ledger.SignedHead) { head = h }
	for r, err := range ledger.ReadStreamHeads(bufio.NewReaderSize(body, 64<<10), onHead) {
		switch next := after + uint64(len(recs)) + 1; {
		case err != nil:
			return nil, fmt.Errorf("the copy does not read: %w", err)
		case r.Poll != poll || r.Replica != replica:
			return nil, fmt.Errorf("the copy holds a record of %s/%s", r.Poll, r.Replica)
		case r.Seq != next || r.Prev != prev:
			return nil, fmt.Errorf("%w: the copy's seq %d does not continue this chain at seq %d", ledger.ErrChain, r.Seq, next-1)
		case len(recs) == maxCompletion:
			return nil, fmt.Errorf("the copy holds more than %d records past seq %d", maxCompletion, after)
		}
		prev = r.KeepHash()
		recs = append(recs, r)
	}
	switch {
	case len(recs) == 0:
		return nil, nil
	case head == nil:
		return nil, fmt.Errorf("the copy's %d records end at no head this replica signed", len(recs))
	case head.Poll != poll || head.Replica != replica || !bytes.Equal(head.Pub, pub) || !head.Verify():
		return nil, fmt.Errorf("the copy's head is not signed with this replica's key (key %s)", head.KeyID())
	case head.Seq != recs[len(recs)-1].Seq || head.Hash != prev:
		return nil, fmt.Errorf("the copy's records do not end at the head this replica signed (seq %d)", head.Seq)
	}
	return recs, nil
}

// apply imports records completing this replica's chain of poll into the
// ledger (with their idempotency keys) and applies them to the state: the
// record count, and the ballots, with the counters set to what the
// ballots make this replica count. The counters do not take each
// ballot's move on top of what they hold: after a restore they were
// raised to the cluster's entries, which count these votes already.
func (f *copyFetcher) apply(poll string, recs []ledger.Record) error {
	n := f.n
	if _, err := n.ledger.Import(ledger.RecordsOf(recs)); err != nil {
		return fmt.Errorf("node: restore: cannot import the copy of %s: %w", poll, err)
	}
	def, ok := n.state.Defs.Poll(poll)
	if !ok {
		return fmt.Errorf("node: restore: poll %s is no longer served", poll)
	}
	bs := make([]crdt.Ballot, 0, len(recs))
	for i := range recs {
		r := &recs[i]
		b := ingest.BallotOf(r, n.state.Hash(r.Voter), n.state.Hash(r.Idem), n.cfg.TrustFloor)
		if option, ok := def.OptionID(r.Option); ok {
			b.Option = option // the poll's own string, as the replay applies it
		}
		bs = append(bs, b)
	}
	if err := n.state.AddRecords(poll, uint64(len(recs))); err != nil {
		return fmt.Errorf("node: restore: %w", err)
	}
	if err := n.state.RestoreBallots(poll, bs); err != nil {
		return fmt.Errorf("node: restore: %w", err)
	}
	return nil
}

// backupFiles are the data dir's files a backup carries besides the
// ledger: what makes the replica itself, and the session secret the node
// made there when it was given none (--session-secret), so that the voter
// tokens it signed are still good once the backup is restored. The admin
// token is left out (a new one is made, or --admin-token-file given), and
// so is the vote-state checkpoint (it may be newer than the ledger copy;
// the restored node replays the ledger instead).
var backupFiles = []string{replicaIDFile, signingKeyFile, hlcFile, ipSaltFile, sessionSecretFile}

// backupServer serves GET /v1/backup (internal/backup) from this node's
// ledger and data dir.
func (n *Node) backupServer() *backup.Server {
	files := backupFiles
	if n.cfg.SessionSecret != "" {
		// The data dir's secret, if any, is not the one in use
		// (--session-secret is): the restored node is given that one again.
		files = nil
		for _, f := range backupFiles {
			if f != sessionSecretFile {
				files = append(files, f)
			}
		}
	}
	return &backup.Server{
		DataDir: n.cfg.DataDir, LedgerDir: ledgerDir, Files: files,
		Checkpoint: n.ledger.Checkpoint,
		Manifest: func(now time.Time) backup.Manifest {
			m := backup.Manifest{Replica: n.replica, Region: n.cfg.Region, Node: n.cfg.NodeName, CreatedAt: now.UnixMilli(),
				Version: buildinfo.Read().String(), SessionSecret: backup.SessionSecretInBackup}
			if n.cfg.SessionSecret != "" {
				m.SessionSecret = backup.SessionSecretConfigured
			}
			return m
		},
		Now: n.cfg.Now, Log: n.log,
	}
}
