package main

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

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
	problems := replicaProblems(v, mine.Replicas)
	if mine.Digest != v.Digest || len(problems) > 0 {
		fmt.Fprintf(stdout, "\nNOT REPRODUCED: the files give digest %s (total %d, %d records), the certificate %s (total %d)\n", mine.Digest, mine.Total, mine.Records, v.Digest, v.Total)
		for _, p := range problems {
			fmt.Fprintln(stdout, p)
		}
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
	if v.Detail == nil {
		return
	}
	for _, e := range v.Detail.Excluded {
		fmt.Fprintf(w, "EXCLUDED replica %s: %s\n", e.Replica, e.Reason)
	}
	for _, l := range v.Detail.Lost {
		fmt.Fprintf(w, "LOST %d %s of replica %s (seq %d to %d): %s\n", l.Count, plural(l.Count, "record", "records"), l.Replica, l.From, l.To, l.Reason)
	}
	for _, c := range v.Detail.FromCopy {
		fmt.Fprintf(w, "FROM COPY replica %s ← %s: %d %s read from its copy (its node was gone; export it with tally ledger export --copy-of %s)\n",
			c.Replica, c.Holder, c.Records, plural(c.Records, "record", "records"), c.Replica)
	}
	if v.Detail.Result != nil {
		printResult(w, v.Detail.Result)
	}
}

// replicaProblems compares the chains a certificate counted with the
// chains the files give: each replica it counted that the files lack or
// hold otherwise, and each the files hold that it did not count. None
// (nil) when they match, or the view carries no result to compare.
func replicaProblems(v api.ResultView, got []ledger.Chain) []string {
	if v.Detail == nil || v.Detail.Result == nil {
		return nil
	}
	have := map[string]ledger.Chain{}
	for _, c := range got {
		have[c.Replica] = c
	}
	copies := map[string]api.CopySource{}
	for _, c := range v.Detail.FromCopy {
		copies[c.Replica] = c
	}
	var out []string
	counted := map[string]bool{}
	for _, want := range v.Detail.Result.Replicas {
		counted[want.Replica] = true
		hint := ""
		if src, ok := copies[want.Replica]; ok {
			hint = fmt.Sprintf("; exported from a copy: use tally ledger export --copy-of %s (the copy held by %s)", want.Replica, src.Holder)
		}
		switch c, ok := have[want.Replica]; {
		case !ok:
			out = append(out, fmt.Sprintf("MISSING replica %s: the certificate counts its %d %s, no file holds it%s",
				want.Replica, want.Records, plural(want.Records, "record", "records"), hint))
		case c.Records != want.Records || c.Head != want.Head:
			out = append(out, fmt.Sprintf("DIFFERS replica %s: the files hold %d records (head %s), the certificate %d (head %s)%s",
				want.Replica, c.Records, c.Head, want.Records, want.Head, hint))
		}
	}
	excluded := map[string]string{}
	for _, e := range v.Detail.Excluded {
		excluded[e.Replica] = e.Reason
	}
	for _, c := range got {
		if counted[c.Replica] {
			continue
		}
		why := "the certificate does not count it"
		if r, ok := excluded[c.Replica]; ok {
			why = "the certificate excluded it (" + r + "): leave its file out"
		}
		out = append(out, fmt.Sprintf("EXTRA replica %s: the files hold %d of its records; %s", c.Replica, c.Records, why))
	}
	return out
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

// exportCopies fetches, for each replica of copyOf and, with fromCert,
// each replica the poll's certificate read from a copy (detail.from_copy),
// a node's copy of that replica's chain (GET …/ledger?copy_of=REPLICA,
// admin) into dir. Every node is asked and the longest copy that verifies
// is kept (a node that holds none answers with none of its records), one
// file per replica: copy-REPLICA-POLL.ndjson.
func exportCopies(nf nodeFlags, nodes []source, poll, dir string, copyOf []string, fromCert bool, stderr io.Writer) int {
	if dir == "-" {
		dir = "."
	}
	wanted := slices.Clone(copyOf)
	holders := map[string]string{}
	if fromCert {
		v, err := certificateFrom(nf, nodes, poll)
		if err != nil {
			fmt.Fprintf(stderr, "tally: warning: no certificate to read its copies from: %v\n", err)
		}
		if v.Detail != nil {
			for _, c := range v.Detail.FromCopy {
				holders[c.Replica] = c.Holder
				if !slices.Contains(wanted, c.Replica) {
					fmt.Fprintf(stderr, "certificate: replica %s was certified from the copy held by %s (%d records): fetching it\n", c.Replica, c.Holder, c.Records)
					wanted = append(wanted, c.Replica)
				}
			}
		}
	}
	status := 0
	for _, replica := range wanted {
		if code := exportCopy(nf, nodes, poll, dir, replica, holders[replica], stderr); code != 0 {
			status = code
		}
	}
	return status
}

// certificateFrom is the poll's result from the first node that answers.
func certificateFrom(nf nodeFlags, nodes []source, poll string) (api.ResultView, error) {
	var last error
	for _, n := range nodes {
		c, err := nf.clientAt(n.url, n.from)
		if err != nil {
			return api.ResultView{}, err
		}
		v, err := c.Result(context.Background(), poll)
		if err == nil {
			return v, nil
		}
		last = nf.explain(err)
	}
	return api.ResultView{}, last
}

// exportCopy asks every node for its copy of replica's chain and keeps
// the longest that verifies (on a tie, one that ends with the replica's
// signed head, else the first). holder is the replica the certificate
// read it from, for the error when none has it.
func exportCopy(nf nodeFlags, nodes []source, poll, dir, replica, holder string, stderr io.Writer) int {
	name := filepath.Join(dir, "copy-"+safeName(replica)+"-"+poll+".ndjson")
	var best struct {
		tmp, url string
		records  uint64
		signed   bool
	}
	defer func() {
		if best.tmp != "" {
			os.Remove(best.tmp)
		}
	}()
	for _, n := range nodes {
		tmp, records, signed, err := fetchCopy(nf, n, poll, dir, replica)
		if err != nil {
			fmt.Fprintf(stderr, "tally: copy of %s: %v\n", replica, err)
			continue
		}
		if best.tmp == "" || records > best.records || records == best.records && signed && !best.signed {
			if best.tmp != "" {
				os.Remove(best.tmp)
			}
			best.tmp, best.url, best.records, best.signed = tmp, n.url, records, signed
		} else {
			os.Remove(tmp)
		}
	}
	if best.tmp == "" || best.records == 0 {
		fmt.Fprintf(stderr, "tally: no node given holds a copy of replica %s's records of poll %s", replica, poll)
		if holder != "" {
			fmt.Fprintf(stderr, " (the certificate read it from %s: give that node's --url)", holder)
		}
		fmt.Fprintln(stderr)
		return 1
	}
	if err := os.Rename(best.tmp, name); err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	best.tmp = ""
	head := "its own signed head"
	if !best.signed {
		head = "no signed head of its own (certification refuses such a copy)"
	}
	fmt.Fprintf(stderr, "%s: copy of %s, %d %s, %s → %s\n", best.url, replica, best.records, plural(best.records, "record", "records"), head, name)
	return 0
}

// fetchCopy fetches node n's copy of replica's chain into a temporary
// file in dir and verifies it: its name, the replica's records in it, and
// whether the replica's signed head ends it.
func fetchCopy(nf nodeFlags, n source, poll, dir, replica string) (tmp string, records uint64, signed bool, err error) {
	c, err := nf.clientAt(n.url, n.from)
	if err != nil {
		return "", 0, false, err
	}
	token, _, err := nf.adminToken()
	if err != nil {
		return "", 0, false, err
	}
	u := strings.TrimSuffix(c.URL(), "/") + "/v1/polls/" + url.PathEscape(poll) + "/ledger?copy_of=" + url.QueryEscape(replica)
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return "", 0, false, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
	if err != nil {
		return "", 0, false, err
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		return "", 0, false, nf.explain(client.ResponseError(http.MethodGet, u, res))
	}
	f, err := os.CreateTemp(dir, ".copy-*.ndjson")
	if err != nil {
		return "", 0, false, err
	}
	tmp = f.Name()
	_, err = io.Copy(f, res.Body)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err == nil {
		var chains []ledger.Chain
		chains, err = ledger.VerifyChains(ledger.ReadNDJSONHeads(f, func(h *ledger.SignedHead) { signed = signed || h.Replica == replica }))
		for _, ch := range chains {
			if ch.Replica == replica {
				records = ch.Records
			} else if err == nil {
				err = fmt.Errorf("%s: the copy holds records of replica %s", n.url, ch.Replica)
			}
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", 0, false, fmt.Errorf("%s: %w", n.url, err)
	}
	return tmp, records, signed, nil
}

// safeName is s usable in a file name.
func safeName(s string) string { return strings.NewReplacer(":", "_", "/", "_", "\\", "_").Replace(s) }
