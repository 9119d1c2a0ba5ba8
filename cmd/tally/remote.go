package main

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"tally/api"
	"tally/client"
	"tally/ledger"
)

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// source is a node to export from and where its address came from
// (--url, $TALLY_URL), for errors.
type source struct{ url, from string }

// exportFromNodes fetches each node's records of the poll into dir, one
// file per node, with a progress bar on a terminal.
func exportFromNodes(nf nodeFlags, nodes []source, poll, dir string, stderr io.Writer) int {
	if dir == "-" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	for _, n := range nodes {
		c, err := nf.clientAt(n.url, n.from)
		if err != nil {
			fmt.Fprintf(stderr, "tally: %v\n", err)
			return 2
		}
		body, err := c.Export(context.Background(), poll)
		if err != nil {
			fmt.Fprintf(stderr, "tally: %v\n", nf.explain(err))
			return 1
		}
		u, _ := url.Parse(n.url)
		name := filepath.Join(dir, strings.NewReplacer(":", "_", "/", "_").Replace(u.Host)+"-"+poll+".ndjson")
		f, err := os.Create(name)
		if err != nil {
			body.Close()
			fmt.Fprintf(stderr, "tally: %v\n", err)
			return 1
		}
		var w io.Writer = f
		if sf, ok := stderr.(*os.File); ok && term.IsTerminal(int(sf.Fd())) {
			w = io.MultiWriter(f, progressbar.DefaultBytes(-1, "fetching "+u.Host))
		}
		nbytes, err := io.Copy(w, body)
		body.Close()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			fmt.Fprintf(stderr, "tally: %s: %v\n", n.url, err)
			return 1
		}
		fmt.Fprintf(stderr, "%s: %d bytes → %s\n", n.url, nbytes, name)
	}
	return 0
}

// pollResult prints a node's certified result and, given export files,
// whether they reproduce it.
func pollResult(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally poll result", "tally poll result --poll ID [--url URL] [--json] [EXPORT.ndjson…]")
	var nf nodeFlags
	nf.register(fs)
	poll := fs.String("poll", "", "poll id")
	asJSON := fs.Bool("json", false, "print the node's answer as JSON")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *poll == "" {
		return usageError(fs, stderr, "--poll is required")
	}
	v, code := call(nf, stderr, func(ctx context.Context, c *client.Client) (api.ResultView, error) { return c.Result(ctx, *poll) })
	if code != 0 {
		return code
	}
	if *asJSON {
		writeJSON(stdout, v)
	} else {
		printView(stdout, v)
	}
	if v.Status != "reconciled" {
		return 1
	}
	if fs.NArg() == 0 {
		return 0
	}
	in, err := openInputs(fs.Args(), stderr, "reproducing")
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	// The certificate's signature, and the key it was made with against
	// the key that signed the certifier's chain head in the exports.
	heads := map[string]string{} // replica → key id of its signed head
	streams := make([]iter.Seq2[ledger.Record, error], len(in.files))
	for i := range in.files {
		streams[i] = in.named(i, ledger.ReadNDJSONHeads(in.reader(i), func(h *ledger.SignedHead) { heads[h.Replica] = h.KeyID() }))
	}
	rc := ledger.ReconcileConfig{Poll: v.Poll}
	if v.Detail != nil {
		rc.ClosesAt = v.Detail.ClosesAt
		if r := v.Detail.Result; r != nil {
			rc.FirstWins, rc.CloseRule = r.FirstWins, r.CloseRule
		}
	}
	mine, err := ledger.ReconcileWith(rc, streams...)
	in.close()
	if err != nil {
		fmt.Fprintf(stderr, "tally: the files do not reconcile: %v\n", err)
		return 1
	}
	if mine.Digest != v.Digest {
		fmt.Fprintf(stdout, "\nNOT REPRODUCED: the files give digest %s (total %d, %d records)\n", mine.Digest, mine.Total, mine.Records)
		return 1
	}
	fmt.Fprintf(stdout, "\nreproduced: %d %s the same digest %s\n", len(in.files), plural(uint64(len(in.files)), "file gives", "files give"), mine.Digest)
	return checkSignature(stdout, v, heads)
}

// checkSignature verifies the certificate's signature with the
// certifier's key, and that key against the one that signed the
// certifier's chain head in the exports (when they hold one).
func checkSignature(w io.Writer, v api.ResultView, heads map[string]string) int {
	c := v.Certificate
	if c == nil || len(c.Sig) == 0 {
		fmt.Fprintln(w, "certificate: unsigned")
		return 1
	}
	if !c.VerifySignature(v.CertifierKey) {
		fmt.Fprintf(w, "certificate: signature of %s does NOT verify\n", c.By)
		return 1
	}
	id := (&ledger.SignedHead{Pub: v.CertifierKey}).KeyID()
	switch head, ok := heads[c.By]; {
	case !ok:
		fmt.Fprintf(w, "certificate: signed by %s, key %s (no export of that replica carries a signed head to compare)\n", c.By, id)
	case head != id:
		fmt.Fprintf(w, "certificate: signed by %s with key %s, but its exports are signed with key %s\n", c.By, id, head)
		return 1
	default:
		fmt.Fprintf(w, "certificate: signed by %s, key %s, the key that signed its exports\n", c.By, id)
	}
	return 0
}

func printView(w io.Writer, v api.ResultView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "status\t%s\n", v.Status) // the poll's id heads the result table below
	if v.Detail == nil || v.Detail.Result == nil {
		fmt.Fprintf(tw, "poll\t%s\n", v.Poll)
	}
	if v.Reason != "" {
		fmt.Fprintf(tw, "reason\t%s\n", v.Reason)
	}
	if v.Coordinator != "" {
		fmt.Fprintf(tw, "coordinator\t%s\n", v.Coordinator)
	}
	tw.Flush()
	if v.Detail != nil && v.Detail.Result != nil {
		for _, e := range v.Detail.Excluded {
			fmt.Fprintf(w, "EXCLUDED replica %s: %s\n", e.Replica, e.Reason)
		}
		for _, l := range v.Detail.Lost {
			fmt.Fprintf(w, "LOST %d %s of replica %s (seq %d to %d): %s\n", l.Count, plural(l.Count, "record", "records"), l.Replica, l.From, l.To, l.Reason)
		}
		printResult(w, v.Detail.Result)
	}
}

// pollCertify asks a node to certify now, optionally without replicas.
func pollCertify(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally poll certify", "tally poll certify --poll ID [--url URL] [--exclude REPLICA | --accept-lost REPLICA]… [--reason TEXT] [--json]")
	var nf nodeFlags
	nf.register(fs)
	poll := fs.String("poll", "", "poll id")
	reason := fs.String("reason", "", "why, recorded in the certificate (required with --exclude and --accept-lost)")
	asJSON := fs.Bool("json", false, "print the node's answer as JSON")
	var exclude, acceptLost stringList
	fs.Var(&exclude, "exclude", "certify without this replica (repeatable); recorded in the result")
	fs.Var(&acceptLost, "accept-lost", "certify this replica with the records its ledger still holds, after a restore from an older backup (repeatable); the records it acknowledged and lost are stated in the result")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	switch {
	case *poll == "":
		return usageError(fs, stderr, "--poll is required")
	case len(exclude)+len(acceptLost) > 0 && strings.TrimSpace(*reason) == "":
		return usageError(fs, stderr, "--exclude and --accept-lost need --reason (recorded in the certificate)")
	}
	req := api.CertifyRequest{Exclude: exclude, AcceptLost: acceptLost, Reason: *reason}
	v, code := call(nf, stderr, func(ctx context.Context, c *client.Client) (api.ResultView, error) { return c.Certify(ctx, *poll, req) })
	if code != 0 {
		return code
	}
	if *asJSON {
		writeJSON(stdout, v)
	} else {
		printView(stdout, v)
	}
	if v.Status != "reconciled" {
		return 1
	}
	return 0
}

// plural picks the word for n.
func plural(n uint64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
