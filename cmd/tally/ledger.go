package main

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"tally/api"
	"tally/internal/atomicfile"
	"tally/ledger"
	"tally/merkle"
	"tally/poll"
	"tally/receipt"
	"tally/trust"
)

const ledgerHelp = `usage: tally ledger <subcommand> [flags]

subcommands:
  verify [--json] FILE…     check the hash chains of exported ledgers (NDJSON)
  merge [--json] FILE…      reconcile exports into the exact result, its
                            digest and its tree's root (--closes-at, --close-rule and --poll as
                            in the certified result, to reproduce its digest;
                            --certificate FILE: check against it, naming the
                            replicas it counts that the files lack)
  export --poll ID [--url URL…] [--copy-of REPLICA…] [-o DIR]
                            fetch each running node's records of a poll
                            (--url, else $TALLY_URL; admin), and the copies
                            of lost replicas' chains its certificate counts
  export --poll ID --data-dir DIR [-o FILE]
                            export one poll from a stopped node's data dir
                            (./data when no --url nor $TALLY_URL is given)
  backup [--url URL] -o DIR an online, consistent copy of a running node's
                            ledger and identity (admin)
  restore --from DIR --data-dir NEW --original-is-gone
                            put a backup in a new data dir, as the same
                            replica (only when the original is gone for good)

The commands that call a node take --url URL (--node is its old
spelling), else $TALLY_URL, and the admin token from --token-file FILE,
$TALLY_TOKEN or --token. "tally ledger SUB --help" lists its flags.
`

func runLedger(args []string, stdout, stderr io.Writer) int {
	return group("ledger", ledgerHelp, map[string]func([]string, io.Writer, io.Writer) int{
		"verify":  ledgerVerify,
		"merge":   ledgerMerge,
		"export":  ledgerExport,
		"backup":  ledgerBackup,
		"restore": ledgerRestore,
	}, args, stdout, stderr)
}

// inputs opens the export files. With a terminal on stderr, reading them
// drives one progress bar over their total size.
type inputs struct {
	files []*os.File
	bar   *progressbar.ProgressBar
}

func openInputs(names []string, stderr io.Writer, what string) (*inputs, error) {
	in := &inputs{}
	var total int64
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			in.close()
			return nil, err
		}
		in.files = append(in.files, f)
		if st, err := f.Stat(); err == nil {
			total += st.Size()
		}
	}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		in.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription(what),
			progressbar.OptionShowBytes(true),
			progressbar.OptionThrottle(100e6),
			progressbar.OptionClearOnFinish(),
		)
	}
	return in, nil
}

// closes returns the close line of each file (nil for a file without
// one): it is the first line, so only the start of each is read.
func (in *inputs) closes() []*ledger.PollClose {
	out := make([]*ledger.PollClose, len(in.files))
	for i, f := range in.files {
		head := io.NewSectionReader(f, 0, 2*ledger.MaxLineBytes)
		for range ledger.ReadExport(head, ledger.ExportHooks{Close: func(c ledger.PollClose) { out[i] = &c }}) {
			break // the first record (or a line cut by the section's end): past the close line
		}
	}
	return out
}

// mergeClose decides the close a merge applies: the flags when given,
// else the exports' close lines, which must agree. It returns a warning
// for the auditor when no export says how the poll closed.
// mergeFlags are the merge's flags a close line sets when they are not given.
type mergeFlags struct {
	closesAt  *int64
	firstWins *bool
	closeRule *string
}

func mergeClose(files []string, closes []*ledger.PollClose, f mergeFlags, flagsSet map[string]bool) (warning string, err error) {
	switch *f.closeRule {
	case "stamp":
		*f.closeRule = ""
	case "", ledger.CloseByNode:
	default:
		return "", fmt.Errorf("--close-rule %q: want node or stamp", *f.closeRule)
	}
	var from *ledger.PollClose
	for i, c := range closes {
		switch {
		case c == nil:
		case from == nil:
			from = c
		case *c != *from:
			return "", fmt.Errorf("%s and %s disagree on how poll %q closed (closes_at %d, first_wins %t, close_rule %q against %d, %t, %q): export them again after the close, or give --closes-at, --first-wins and --close-rule as the certified result says",
				files[0], files[i], c.Poll, from.ClosesAt, from.FirstWins, from.CloseRule, c.ClosesAt, c.FirstWins, c.CloseRule)
		}
	}
	if from == nil {
		if !flagsSet["closes-at"] {
			return "no export says how the poll closed (exports from an older node): votes are judged late only by their own flag, and the digest matches a certificate only with --closes-at (and --first-wins for a quiz question) from its result", nil
		}
		return "", nil
	}
	if !flagsSet["closes-at"] {
		*f.closesAt = from.ClosesAt
	}
	if !flagsSet["first-wins"] {
		*f.firstWins = from.FirstWins
	}
	if !flagsSet["close-rule"] {
		*f.closeRule = from.CloseRule
	}
	return "", nil
}

// stream returns file i's records.
func (in *inputs) stream(i int) iter.Seq2[ledger.Record, error] {
	return in.named(i, ledger.ReadNDJSON(in.reader(i)))
}

// reader is file i, counted by the progress bar.
func (in *inputs) reader(i int) io.Reader {
	var r io.Reader = in.files[i]
	if in.bar != nil {
		pr := progressbar.NewReader(r, in.bar)
		r = &pr
	}
	return r
}

// named prefixes records' errors with file i's name.
func (in *inputs) named(i int, records iter.Seq2[ledger.Record, error]) iter.Seq2[ledger.Record, error] {
	name := in.files[i].Name()
	return func(yield func(ledger.Record, error) bool) {
		for rec, err := range records {
			if err != nil {
				err = fmt.Errorf("%s: %w", name, err)
			}
			if !yield(rec, err) || err != nil {
				return
			}
		}
	}
}

func (in *inputs) close() {
	if in.bar != nil {
		in.bar.Finish()
	}
	for _, f := range in.files {
		f.Close()
	}
}

func ledgerVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally ledger verify", "tally ledger verify [--json] FILE...")
	asJSON := fs.Bool("json", false, "print the verified chains as JSON")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(fs, stderr, "no export FILE given")
	}
	in, err := openInputs(fs.Args(), stderr, "verifying")
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	defer in.close()
	type chain struct {
		ledger.Chain
		SignedBy string `json:"signed_by,omitempty"` // key id of the signed head, if the export has one
	}
	type fileChains struct {
		File   string  `json:"file"`
		Chains []chain `json:"chains"`
	}
	var all []fileChains
	status := 0
	for i, name := range fs.Args() {
		signers := map[string]string{} // replica → key id
		records := ledger.ReadNDJSONHeads(in.reader(i), func(h *ledger.SignedHead) { signers[h.Replica] = h.KeyID() })
		chains, err := ledger.VerifyChains(in.named(i, records))
		if err != nil {
			fmt.Fprintf(stderr, "FAIL %v\n", err)
			status = 1
			continue
		}
		f := fileChains{File: name}
		for _, c := range chains {
			f.Chains = append(f.Chains, chain{Chain: c, SignedBy: signers[c.Replica]})
		}
		all = append(all, f)
	}
	if *asJSON {
		writeJSON(stdout, all)
		return status
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tPOLL\tREPLICA\tRECORDS\tHEAD\tSIGNED BY")
	for _, f := range all {
		for _, c := range f.Chains {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", f.File, c.Poll, c.Replica, c.Records, c.Head, cmp.Or(c.SignedBy, "(unsigned)"))
		}
	}
	tw.Flush()
	return status
}

// ledgerMerge runs tally ledger merge. It is long because it is one
// command's steps in order: its flags, its inputs and their close line,
// the merge, and the comparison with a certificate.
func ledgerMerge(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally ledger merge", "tally ledger merge [--json] [--trust-floor F] [--closes-at MS] [--close-rule node|stamp] [--poll ID] [--certificate FILE] FILE...")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	floor := fs.Float64("trust-floor", 0, "also exclude counted votes whose trust score is below this")
	rescore := fs.Bool("rescore", false, "re-run the trust filter: score each vote from its recorded signals with this version's trust.Score and shadow those under --trust-floor (default 0.15)")
	closesAt := fs.Int64("closes-at", 0, "the poll's final close (Unix ms) (default: the exports' close line, as the node certified it)")
	closeRule := fs.String("close-rule", "", `how the close applies: "node", a vote is late when its node ledgered it late (certificates since 2026-12), or "stamp", votes stamped at or after --closes-at are late (default: the exports' close line)`)
	firstWins := fs.Bool("first-wins", false, "a quiz question: each voter's first answer counts, not the last (default: the exports' close line)")
	pollID := fs.String("poll", "", "the poll reconciled (as in its certified result); needed to reproduce the digest of a poll nobody voted in")
	certFile := fs.String("certificate", "", "the poll's certified result, as `FILE` (tally poll result --json, or GET /v1/polls/ID/result): name each replica it counts that the files lack, and exit 1 unless they reproduce its digest and tree")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(fs, stderr, "no export FILE given")
	}
	cert, err := readCertificate(*certFile)
	if err != nil {
		fmt.Fprintf(stderr, "tally: --certificate %s: %v\n", *certFile, err)
		return 1
	}
	if cert != nil && *pollID == "" {
		*pollID = cert.Poll
	}
	// A merge holds every record in memory once; collect less often.
	debug.SetGCPercent(400)
	in, err := openInputs(fs.Args(), stderr, "merging")
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	closes := in.closes()
	for _, c := range closes {
		if c != nil && *pollID == "" {
			*pollID = c.Poll // the digest of a poll nobody voted in needs it
		}
	}
	warning, err := mergeClose(fs.Args(), closes, mergeFlags{closesAt, firstWins, closeRule}, set)
	if err != nil {
		in.close()
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	if warning != "" {
		fmt.Fprintf(stderr, "tally: warning: %s\n", warning)
	}
	streams := make([]iter.Seq2[ledger.Record, error], len(in.files))
	taps := make([]treeTap, len(in.files))
	for i := range in.files {
		streams[i] = taps[i].tap(in.stream(i))
	}
	rc := ledger.ReconcileConfig{TrustFloor: *floor, ClosesAt: *closesAt, CloseRule: *closeRule, Poll: *pollID, FirstWins: *firstWins}
	if *rescore {
		f := *floor
		if f == 0 {
			f = trust.DefaultFloor
		}
		rc.Shadow = func(r *ledger.Record) bool {
			if r.Signals == nil { // written without signals: keep the node's decision
				return !r.Counted
			}
			return trust.Score(trust.FromLedger(r.Signals)) < f
		}
	}
	res, err := ledger.ReconcileWith(rc, streams...)
	in.close()
	if err != nil {
		fmt.Fprintf(stderr, "tally: cannot merge: %v\n", err)
		return 1
	}
	return mergeReport(stdout, stderr, *asJSON, res, mergeTree(res, taps), cert)
}

// mergeReport prints a merge's result and its tree, compares them with
// the certificate when one is given, and returns the exit status.
func mergeReport(stdout, stderr io.Writer, asJSON bool, res *ledger.Result, tree treeRoot, cert *api.ResultView) int {
	note := stdout // the comparison with the certificate: on stderr under --json
	if asJSON {
		writeJSON(stdout, struct {
			*ledger.Result
			TreeSize uint64 `json:"tree_size"`
			TreeRoot string `json:"tree_root"`
		}{res, tree.size, tree.root})
		note = stderr
	} else {
		printResult(stdout, res)
		fmt.Fprintf(stdout, "\ntree: %d %s, root %s\n", tree.size, plural(tree.size, "record", "records"), tree.root)
	}
	if cert == nil {
		return 0
	}
	problems := replicaProblems(*cert, res.Replicas)
	var certTree *receipt.TreeHead
	if cert.Detail != nil {
		certTree = cert.Detail.Tree
	}
	if certTree != nil && (certTree.Size != tree.size || certTree.Root != tree.root) {
		problems = append(problems, fmt.Sprintf("TREE DIFFERS: the files' tree is %d records with root %s, the certificate's %d with root %s", tree.size, tree.root, certTree.Size, certTree.Root))
	}
	if res.Digest != cert.Digest || len(problems) > 0 {
		fmt.Fprintf(note, "\nNOT REPRODUCED: the files give digest %s (total %d), the certificate %s (total %d)\n", res.Digest, res.Total, cert.Digest, cert.Total)
		for _, p := range problems {
			fmt.Fprintln(note, p)
		}
		return 1
	}
	fmt.Fprintf(note, "\nreproduced: the certificate's digest %s\n", res.Digest)
	if certTree != nil {
		fmt.Fprintf(note, "reproduced: the certificate's tree, %d %s, root %s\n", tree.size, plural(tree.size, "record", "records"), tree.root)
	} else {
		fmt.Fprintln(note, "the certificate holds no tree (certified by a release before receipts): no root to compare")
	}
	return 0
}

// treeTap keeps, of the records a merge reads from one stream, what the
// tree over them needs without hashing any again: a record's Prev is the
// hash of the one before it in its chain (the merge checks the chains).
type treeTap struct {
	prevs map[string][]seqPrev // by replica
}

type seqPrev struct {
	seq  uint64
	prev ledger.Hash
}

// tap is s, each record's Prev kept on the way.
func (t *treeTap) tap(s iter.Seq2[ledger.Record, error]) iter.Seq2[ledger.Record, error] {
	t.prevs = map[string][]seqPrev{}
	return func(yield func(ledger.Record, error) bool) {
		for rec, err := range s {
			if err == nil && rec.Seq > 1 {
				t.prevs[rec.Replica] = append(t.prevs[rec.Replica], seqPrev{rec.Seq, rec.Prev})
			}
			if !yield(rec, err) {
				return
			}
		}
	}
}

// treeRoot is the size and root (hex) of a Merkle tree.
type treeRoot struct {
	size uint64
	root string
}

// mergeTree is the tree a certificate's tree head names, over the merged
// records: the Merkle tree (package merkle) whose leaves are every
// record's hash and what the result made of it (its disposition),
// chains in replica order (res.Replicas), each by seq. Record seq's hash
// is seq+1's Prev, and the last one's the chain's head: the chains were
// checked, so every one is known. The root is computed in one pass.
func mergeTree(res *ledger.Result, taps []treeTap) treeRoot {
	leaves := func(yield func(merkle.Leaf) bool) {
		for _, c := range res.Replicas {
			if c.Records == 0 {
				continue
			}
			hashes := make([]ledger.Hash, c.Records) // hashes[i]: seq i+1's
			hashes[c.Records-1] = c.Head
			for _, t := range taps {
				for _, sp := range t.prevs[c.Replica] {
					if sp.seq <= c.Records {
						hashes[sp.seq-2] = sp.prev
					}
				}
			}
			disp := res.Dispositions(c.Replica)
			for i, h := range hashes {
				var d byte
				if i < len(disp) {
					d = byte(disp[i])
				}
				if !yield(merkle.LeafOf(h, d)) {
					return
				}
			}
		}
	}
	root, size, _ := merkle.Root(leaves) // no error: the hashes are in memory
	return treeRoot{size: size, root: hex.EncodeToString(root[:])}
}

func printResult(w io.Writer, res *ledger.Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "poll\t%s\n", res.Poll)
	fmt.Fprintf(tw, "total\t%d\n", res.Total)
	fmt.Fprintf(tw, "voters\t%d\n", res.Voters)
	fmt.Fprintf(tw, "records\t%d\t(duplicates %d, late %d, shadowed %d, superseded %d)\n",
		res.Records, res.Duplicates, res.Late, res.Shadowed, res.Superseded)
	fmt.Fprintf(tw, "digest\t%s\n\n", res.Digest)
	fmt.Fprintln(tw, "OPTION\tVOTES\tSHARE")
	// Most votes first; ties in option order.
	options := slices.SortedFunc(maps.Keys(res.Totals), func(a, b string) int {
		if c := cmp.Compare(res.Totals[b], res.Totals[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, o := range options {
		share := 0.0
		if res.Total > 0 {
			share = 100 * float64(res.Totals[o]) / float64(res.Total)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\n", o, res.Totals[o], share)
	}
	fmt.Fprintln(tw, "\nREPLICA\tRECORDS\tHEAD")
	for _, c := range res.Replicas {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", c.Replica, c.Records, c.Head)
	}
	tw.Flush()
}

// exportUsage is tally ledger export's synopsis and where it reads from.
const exportUsage = `tally ledger export --poll ID [--url URL]… [--copy-of REPLICA]… [-o DIR]  (running nodes, by their API)
       tally ledger export --poll ID --data-dir DIR [-o FILE]  (a stopped node's data dir)

The records come from the first of these that is given:
  1. --url URL, repeated for every replica (--node is its old spelling):
     each running node's records, one file per node in the -o directory
  2. --data-dir DIR: a stopped node's data dir, read-only
  3. $TALLY_URL: that running node's records, as with --url
  4. ./data: the stopped node's data dir here
A running node holds its data dir's lock: export from it by URL.
--url and --data-dir together are refused.

From running nodes, a replica whose node is gone is exported from a
copy of its chain (GET /v1/polls/ID/ledger?copy_of=REPLICA): each one
the poll's certificate was read from a copy (its from_copy), and each
--copy-of REPLICA, into copy-REPLICA-ID.ndjson, the longest copy any
node given holds.`

// ledgerExport runs tally ledger export. It is long because it is one
// command's two forms (running nodes and a stopped node's data dir) and
// their flags, checked together.
func ledgerExport(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally ledger export", exportUsage)
	dir := fs.String("data-dir", "", "a stopped node's data directory (default ./data, when neither --url nor $TALLY_URL is given)")
	poll := fs.String("poll", "", "poll id to export")
	out := fs.String("o", "-", "output file; - for standard output (from running nodes: a directory, - for the current one)")
	var urls stringList
	fs.Var(&urls, "url", "a running node to fetch from, `URL` (repeat for every replica) [$TALLY_URL]")
	fs.Var(&urls, "node", aliasPrefix+"url")
	var copyOf stringList
	fs.Var(&copyOf, "copy-of", "also export the copy of this `REPLICA`'s chain that a node given holds (a replica whose node is gone; repeatable)")
	certCopies := fs.Bool("certified-copies", true, "also export each copy the poll's certificate was read from (its from_copy)")
	var nf nodeFlags
	nf.registerToken(fs)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	switch {
	case *poll == "" || fs.NArg() != 0:
		return usageError(fs, stderr, "--poll is required, and no arguments")
	case len(urls) > 0 && *dir != "":
		return usageError(fs, stderr, "give --url (running nodes) or --data-dir (a stopped node), not both")
	case len(copyOf) > 0 && *dir != "":
		return usageError(fs, stderr, "--copy-of reads a copy from running nodes (--url), not from a data dir")
	}
	var nodes []source
	for _, u := range urls {
		nodes = append(nodes, source{u, "--url"})
	}
	if env := os.Getenv("TALLY_URL"); len(nodes) == 0 && *dir == "" && env != "" {
		nodes = append(nodes, source{env, "$TALLY_URL"})
	}
	if len(nodes) > 0 {
		if code := exportFromNodes(nf, nodes, *poll, *out, stderr); code != 0 {
			return code
		}
		return exportCopies(nf, nodes, *poll, *out, copyOf, *certCopies, stderr)
	}
	if len(copyOf) > 0 {
		return usageError(fs, stderr, "--copy-of reads a copy from running nodes: give --url")
	}
	if *dir == "" {
		*dir = "./data"
	}
	// Read-only: an auditor's tool never changes the evidence (Pebble
	// would otherwise flush the write-ahead log into a new table), fails on
	// a damaged ledger, and does not create a ledger where none is.
	l, err := ledger.Open(ledger.Config{Dir: ledgerDir(*dir), ReadOnly: true})
	if errors.Is(err, ledger.ErrLocked) {
		fmt.Fprintf(stderr, "tally: %v (the node is running: export from it with --url URL or $TALLY_URL, or stop it first)\n", err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	defer l.Close()
	polls, err := l.Polls()
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	if !slices.Contains(polls, *poll) {
		fmt.Fprintf(stderr, "tally: no records for poll %q in %s (polls there: %s)\n", *poll, *dir, strings.Join(polls, ", "))
		return 1
	}
	closeLine, err := storedClose(l, *poll)
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	export := func(w io.Writer) (n int, err error) {
		if closeLine != nil {
			if err := ledger.WriteClose(w, *closeLine); err != nil {
				return 0, err
			}
		}
		return l.Export(w, *poll)
	}
	var n int
	if *out == "-" {
		n, err = export(stdout)
	} else {
		err = atomicfile.Write(*out, func(w io.Writer) (err error) { n, err = export(w); return err })
	}
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "exported %d records of poll %s\n", n, *poll)
	return 0
}

// storedClose reads the poll's definition from the ledger's metadata,
// where the node keeps it, and returns the export's close line (nil when
// the node kept no definition: a poll it forgot).
func storedClose(l *ledger.Ledger, id string) (*ledger.PollClose, error) {
	b, ok, err := l.Meta(poll.StoreKey(id))
	if err != nil || !ok {
		return nil, err
	}
	var reg struct {
		Value poll.Definition `json:"value"`
	}
	if err := json.Unmarshal(b, &reg); err != nil {
		return nil, fmt.Errorf("poll %q: its stored definition does not decode: %w", id, err)
	}
	// The rule this version certifies by: a poll certified by an older
	// node reproduces with --close-rule stamp.
	return &ledger.PollClose{Poll: id, ClosesAt: reg.Value.ClosesAt, FirstWins: reg.Value.Quiz != nil, CloseRule: ledger.CloseByNode}, nil
}

// ledgerDir is where a node keeps its Pebble ledger inside its data dir.
func ledgerDir(dataDir string) string { return dataDir + "/ledger" }

// printReport prints a measurement's report: as JSON, or its own table.
// It returns the exit status, 0.
func printReport(w io.Writer, asJSON bool, rep interface{ print(io.Writer) }) int {
	if asJSON {
		writeJSON(w, rep)
	} else {
		rep.print(w)
	}
	return 0
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		fmt.Fprintf(os.Stderr, "tally: %v\n", err)
	}
}

// readCertificate reads a certified result (tally poll result --json, or
// GET /v1/polls/ID/result) from file; nil, nil when file is "".
func readCertificate(file string) (*api.ResultView, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	cert := new(api.ResultView)
	if err := json.Unmarshal(b, cert); err != nil {
		return nil, err
	}
	if cert.Status != "reconciled" || cert.Digest == "" {
		return nil, fmt.Errorf("status %q: not a certified result", cert.Status)
	}
	return cert, nil
}
