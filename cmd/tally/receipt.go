package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"tally/api"
	"tally/client"
	"tally/ledger"
	"tally/receipt"
)

const receiptHelp = `usage: tally receipt <subcommand> [flags]

subcommands:
  verify FILE   check a vote's receipt against its proof in the certified
                result: the replica's signature, the certifier's tree head,
                the record, its path to the certified root, and what became
                of the vote

"tally receipt verify --help" lists its flags (docs/auditing.md, "Receipts").
`

func runReceipt(args []string, stdout, stderr io.Writer) int {
	return group("receipt", receiptHelp, map[string]func([]string, io.Writer, io.Writer) int{
		"verify": receiptVerify,
	}, args, stdout, stderr)
}

const receiptVerifyUsage = `tally receipt verify [--proof FILE | --url URL] [--keys FILE] [--certificate FILE] FILE

FILE holds a vote's receipt: the "receipt" object of the vote's answer,
or the whole answer saved ({"results":[…]}, whose first receipt is
checked, or one result, as tally vote --json prints it).

The proof is read from --proof FILE (a saved GET
/v1/polls/POLL/proofs/LEAF), or fetched from the node at --url URL (else
$TALLY_URL). The replicas' keys are read from --keys FILE (a saved GET
/v1/cluster/keys), or fetched from the same node: keys from the node that
serves the proof are that node's word; an auditor compares them with
other nodes' and with the keys of the signed export heads.

--certificate FILE (a saved GET /v1/polls/POLL/result, or tally poll
result --json) also checks that the signed certificate holds the proof's
tree head, and its signature by the certifier's key.

Each step checked prints a line (✓ or ✗); then what became of the vote.
Exit status: 0 when every step holds (a late or filtered vote too: the
check holds, the vote is not counted), 1 when a step fails or an input
cannot be read, 2 on a usage error.`

// maxReceiptFile bounds a receipt file read: a saved vote answer of a
// batch of votes, indented, is a few kilobytes.
const maxReceiptFile = 64 << 10

// maxKeysFile bounds a saved GET /v1/cluster/keys or certified result.
const maxKeysFile = 16 << 20

// Steps of a receipt's check, in the order they are checked.
var receiptSteps = []struct {
	name string
	err  error
}{
	{"signature", receipt.ErrSignature},
	{"certificate", receipt.ErrCertificate},
	{"record", receipt.ErrRecord},
	{"path", receipt.ErrPath},
	{"root", receipt.ErrRoot},
}

// receiptVerify runs tally receipt verify.
func receiptVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally receipt verify", receiptVerifyUsage)
	proofFile := fs.String("proof", "", "the saved proof, `FILE` (GET /v1/polls/POLL/proofs/LEAF)")
	keysFile := fs.String("keys", "", "the replicas' keys, `FILE` (GET /v1/cluster/keys) (default: fetched from --url)")
	certFile := fs.String("certificate", "", "the poll's certified result, `FILE` (GET /v1/polls/POLL/result): also check that its signed certificate holds the proof's tree head")
	var base string
	urlVar(fs, &base, "the node to fetch the proof and keys from, http://host:port or https://host (default: $TALLY_URL)")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if base == "" {
		base = os.Getenv("TALLY_URL")
	}
	switch {
	case fs.NArg() != 1:
		return usageError(fs, stderr, "give one receipt FILE")
	case *proofFile == "" && base == "":
		return usageError(fs, stderr, "give --proof FILE (a saved proof) or --url URL (a node to fetch it from)")
	case *keysFile == "" && base == "":
		return usageError(fs, stderr, "give --keys FILE (a saved GET /v1/cluster/keys) or --url URL (a node to fetch them from)")
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "tally receipt verify: %v\n", err)
		return 1
	}
	r, err := readReceipt(fs.Arg(0))
	if err != nil {
		return fail(err)
	}
	var cert *api.ResultView
	if *certFile != "" {
		if cert, err = readResult(*certFile); err != nil {
			return fail(fmt.Errorf("--certificate %s: %w", *certFile, err))
		}
	}
	var node *client.Client // asked for what no file gives, and the certificate it serves
	if base != "" {
		if node, err = client.New(base, client.Options{}); err != nil {
			return usageError(fs, stderr, "--url %q: want the node's address, http://host:port or https://host", base)
		}
	}
	p, err := loadProof(*proofFile, node, r)
	if err != nil {
		return fail(err)
	}
	keys, err := loadKeys(*keysFile, node)
	if err != nil {
		return fail(err)
	}
	if cert == nil && node != nil {
		if cert, err = fetchResult(node, r.Poll); err != nil {
			return fail(err)
		}
	}
	return reportReceipt(stdout, r, p, keys, cert)
}

// fetchResult is the certified result the node serves: what the proof's
// tree head must be the one of (a tree head signed by another key the
// node lists, or of a certificate since withdrawn, is not).
func fetchResult(node *client.Client, poll string) (*api.ResultView, error) {
	b, err := fetchBounded(node, "/v1/polls/"+url.PathEscape(poll)+"/result", maxKeysFile, nil)
	if err != nil {
		return nil, fmt.Errorf("the certified result: %w", err)
	}
	v := new(api.ResultView)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("the certified result: not GET /v1/polls/POLL/result's JSON: %v", err)
	}
	return v, nil
}

// reportReceipt checks r against p, prints each step and the verdict,
// and returns the exit status.
func reportReceipt(w io.Writer, r receipt.Receipt, p receipt.Proof, keys receipt.Keys, cert *api.ResultView) int {
	fmt.Fprintf(w, "receipt: vote %s in poll %s, stamped %s, leaf %s\n", r.VoteID, r.Poll, r.Stamp, r.Leaf)
	v, err := receipt.Verify(r, p, keys)
	failed := len(receiptSteps) // the step that failed: none
	if err != nil {
		failed = 0 // a malformed receipt or an unknown error: at the first
		for i, s := range receiptSteps {
			if errors.Is(err, s.err) {
				failed = i
			}
		}
	}
	if cert != nil && failed > 1 { // the tree head holds: is it the certificate's?
		if cerr := checkCertificate(cert, p.TreeHead, keys); cerr != nil {
			failed, err = 1, cerr
		}
	}
	if cert == nil && err == nil {
		defer fmt.Fprintf(w, "(the tree head was not compared with a certificate: give --certificate FILE, or --url URL)\n")
	}
	for i, s := range receiptSteps[:min(failed+1, len(receiptSteps))] {
		if i == failed {
			fmt.Fprintf(w, "%s ✗ %v\n", s.name, err)
			break
		}
		fmt.Fprintf(w, "%s ✓ %s\n", s.name, stepDetail(s.name, r, p, cert))
	}
	if err != nil {
		fmt.Fprintf(w, "\nNOT VERIFIED: the check failed at the %s step.\n", receiptSteps[failed].name)
		return 1
	}
	fmt.Fprintf(w, "\n%s\n", verdictWords(v, p))
	return 0
}

// stepDetail is what a step that held established, in words.
func stepDetail(step string, r receipt.Receipt, p receipt.Proof, cert *api.ResultView) string {
	h := p.TreeHead
	switch step {
	case "signature":
		return r.Replica() + "'s key"
	case "certificate":
		s := fmt.Sprintf("tree of %d %s signed by %s", h.Size, plural(h.Size, "record", "records"), h.By)
		switch {
		case cert != nil && cert.Certificate != nil:
			s += ", held by the certificate signed by " + cert.Certificate.By
		case cert != nil:
			s += ", the certified result's"
		}
		return s
	case "record":
		return fmt.Sprintf("%s: voter %s, option %s", p.Vote.VoteID, p.Vote.Voter, p.Vote.Option)
	case "path":
		return fmt.Sprintf("leaf %d, %d %s", p.Index, len(p.Path), plural(uint64(len(p.Path)), "hash", "hashes"))
	}
	return h.Root
}

// verdictWords says what became of the vote.
func verdictWords(v receipt.Verdict, p receipt.Proof) string {
	option := v.Vote.Option
	switch v.Disposition {
	case receipt.Counted:
		return fmt.Sprintf("Your vote for %s is in the certified result.", option)
	case receipt.Superseded:
		which := "later vote"
		if stampBefore(v.Counted.Stamp, v.Vote.Stamp) { // a stamp tie goes to the later replica: a later vote
			which = "earlier answer (a quiz question's first answer counts)"
		}
		return fmt.Sprintf("Your vote for %s is in the certified result's records, and was replaced by your %s for %s (%s), which is counted.", option, which, v.Counted.Option, v.Counted.VoteID)
	case receipt.Late:
		return fmt.Sprintf("Your vote for %s is in the certified result's records, but it arrived after the poll closed: it is not counted.", option)
	case receipt.Filtered:
		return fmt.Sprintf("Your vote for %s is in the certified result's records, but not counted: its trust score was below the floor (docs/trust.md).", option)
	case receipt.Duplicate:
		if v.Counted != nil {
			return fmt.Sprintf("Your vote for %s was a retry: your vote %s for %s, taken first, stands in its place (%s); a vote counts once.", option, v.Counted.VoteID, v.Counted.Option, p.Counted.Disposition)
		}
		return fmt.Sprintf("Your vote for %s is not counted: an earlier vote with the same idempotency key stands in its place (a key counts once; yours, or another voter's who used it first).", option)
	}
	return "The vote is " + v.Disposition + "."
}

// stampBefore reports whether stamp a (WALL.LOGICAL, as a record's vote
// gives it) is before b.
func stampBefore(a, b string) bool {
	var aw, bw int64
	var al, bl uint32
	fmt.Sscanf(a, "%d.%d", &aw, &al)
	fmt.Sscanf(b, "%d.%d", &bw, &bl)
	return aw < bw || aw == bw && al < bl
}

// checkCertificate checks that the certified result's signed certificate
// holds the tree head h, and its signature by the certifier's key.
// A quiz question's public result holds no signed certificate (it names
// the participants): its tree head is then compared with the result's.
func checkCertificate(v *api.ResultView, h *receipt.TreeHead, keys receipt.Keys) error {
	c := v.Certificate
	if c == nil && v.Status == ledger.Reconciled && v.Detail != nil && v.Detail.Tree != nil {
		return sameTreeHead(v.Detail.Tree, h, v.Digest)
	}
	if c == nil || c.Status != ledger.Reconciled {
		return fmt.Errorf("%w: the result holds no reconciled certificate (status %q)", receipt.ErrCertificate, v.Status)
	}
	if c.Poll != h.Poll {
		return fmt.Errorf("%w: the certificate is poll %q's, the proof poll %q's", receipt.ErrCertificate, c.Poll, h.Poll)
	}
	if !c.VerifySignature(keys(c.By)) {
		return fmt.Errorf("%w: the certificate is not signed by %s's key", receipt.ErrCertificate, c.By)
	}
	var d api.ResultDetail
	if err := json.Unmarshal(c.Detail, &d); err != nil {
		return fmt.Errorf("%w: the certificate's detail: %v", receipt.ErrCertificate, err)
	}
	if d.Tree == nil {
		return fmt.Errorf("%w: the certificate holds no tree head (certified before receipts)", receipt.ErrCertificate)
	}
	return sameTreeHead(d.Tree, h, c.Digest)
}

// sameTreeHead checks that the certificate's tree head t is the proof's
// h, and names the result's digest.
func sameTreeHead(t, h *receipt.TreeHead, digest string) error {
	switch {
	case t.Size != h.Size || t.Root != h.Root:
		return fmt.Errorf("%w: the certificate's tree is %d records with root %s, the proof's %d with root %s", receipt.ErrCertificate, t.Size, t.Root, h.Size, h.Root)
	case t.Poll != h.Poll || t.Digest != h.Digest || t.By != h.By || !bytes.Equal(t.Sig, h.Sig):
		return fmt.Errorf("%w: the certificate's tree head differs from the proof's", receipt.ErrCertificate)
	case digest != h.Digest:
		return fmt.Errorf("%w: the tree head names digest %s, the certificate %s", receipt.ErrCertificate, h.Digest, digest)
	}
	return nil
}

// readReceipt reads a receipt file: a receipt, a vote answer, or one
// result of one.
func readReceipt(name string) (receipt.Receipt, error) {
	b, err := readBounded(name, maxReceiptFile)
	if err != nil {
		return receipt.Receipt{}, err
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return receipt.Receipt{}, fmt.Errorf("%s: not a receipt (JSON): %v", name, err)
	}
	raw := b
	switch {
	case probe["results"] != nil:
		var answer struct {
			Results []struct {
				Receipt json.RawMessage `json:"receipt"`
			} `json:"results"`
		}
		if err := json.Unmarshal(b, &answer); err != nil {
			return receipt.Receipt{}, fmt.Errorf("%s: a vote answer that does not decode: %v", name, err)
		}
		raw = nil
		for _, res := range answer.Results {
			if len(res.Receipt) > 0 && string(res.Receipt) != "null" {
				raw = res.Receipt
				break
			}
		}
		if raw == nil {
			return receipt.Receipt{}, fmt.Errorf("%s: the vote answer holds no receipt (a vote refused, or answered by a node of an older release)", name)
		}
	case probe["receipt"] != nil:
		raw = probe["receipt"]
	}
	r, err := receipt.Decode(raw)
	if err != nil {
		return receipt.Receipt{}, fmt.Errorf("%s: %w", name, err)
	}
	return r, nil
}

// loadProof reads the proof from file, or fetches the receipt's from the
// node.
func loadProof(file string, node *client.Client, r receipt.Receipt) (receipt.Proof, error) {
	var b []byte
	var err error
	if file != "" {
		b, err = readBounded(file, receipt.MaxProofJSON)
	} else {
		b, err = fetchBounded(node, "/v1/polls/"+url.PathEscape(r.Poll)+"/proofs/"+url.PathEscape(r.Leaf), receipt.MaxProofJSON, explainProof(r))
	}
	if err != nil {
		return receipt.Proof{}, err
	}
	p, err := receipt.DecodeProof(b)
	if err != nil {
		return receipt.Proof{}, fmt.Errorf("the proof: %w", err)
	}
	return p, nil
}

// loadKeys reads the replicas' keys from file, or fetches them from the
// node.
func loadKeys(file string, node *client.Client) (receipt.Keys, error) {
	var b []byte
	var err error
	if file != "" {
		b, err = readBounded(file, maxKeysFile)
	} else {
		b, err = fetchBounded(node, "/v1/cluster/keys", maxKeysFile, nil)
	}
	if err != nil {
		return nil, err
	}
	var ks api.ClusterKeys
	if err := json.Unmarshal(b, &ks); err != nil {
		return nil, fmt.Errorf("the keys: not GET /v1/cluster/keys's JSON: %v", err)
	}
	byReplica := make(map[string]ed25519.PublicKey, len(ks.Keys))
	for _, k := range ks.Keys {
		if len(k.PublicKey) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("the keys: replica %s's key is %d bytes, not %d", k.Replica, len(k.PublicKey), ed25519.PublicKeySize)
		}
		if _, twice := byReplica[k.Replica]; twice {
			return nil, fmt.Errorf("the keys: replica %s is listed twice", k.Replica)
		}
		byReplica[k.Replica] = k.PublicKey
	}
	return func(replica string) ed25519.PublicKey { return byReplica[replica] }, nil
}

// readResult reads a saved certified result.
func readResult(name string) (*api.ResultView, error) {
	b, err := readBounded(name, maxKeysFile)
	if err != nil {
		return nil, err
	}
	v := new(api.ResultView)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("not a certified result (GET /v1/polls/POLL/result): %v", err)
	}
	if v.Certificate == nil {
		return nil, fmt.Errorf("status %q: no signed certificate in it", v.Status)
	}
	return v, nil
}

// readBounded reads a file of at most max bytes.
func readBounded(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: over %d bytes: not a file this command reads", name, max)
	}
	return b, nil
}

// fetchBounded GETs path at the node, at most max bytes; explain, when set,
// says an error answer in plain words.
func fetchBounded(node *client.Client, path string, max int64, explain func(*client.Error) error) ([]byte, error) {
	u := strings.TrimSuffix(node.URL(), "/") + path
	res, err := (&http.Client{Timeout: 30 * time.Second}).Get(u)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		e := client.ResponseError(http.MethodGet, u, res)
		if explain != nil {
			return nil, explain(e)
		}
		return nil, e
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("GET %s: an answer over %d bytes", u, max)
	}
	return b, nil
}

// explainProof says a proof request's refusal in plain words.
func explainProof(r receipt.Receipt) func(*client.Error) error {
	return func(e *client.Error) error {
		switch {
		case e.Status == http.StatusNotFound && e.Code == api.CodePollNotFound:
			return fmt.Errorf("the node knows no poll %q (%v)", r.Poll, e)
		case e.Status == http.StatusNotFound && e.Code == api.CodeNotFound && strings.Contains(e.Message, "endpoint"):
			return fmt.Errorf("the node serves no proofs (a release before receipts): ask another node (%v)", e)
		case e.Status == http.StatusNotFound:
			return fmt.Errorf("the certified result of poll %s holds no record with leaf %s: the vote is not among the records it was computed from. The receipt is still %s's signed word that it took vote %s: keep it, and raise it with the poll's organisers (%v)",
				r.Poll, r.Leaf, r.Replica(), r.VoteID, e)
		case e.Status == http.StatusConflict:
			return fmt.Errorf("poll %s has no certified result with a tree yet (still open, not certified, or certified by a release before receipts): ask again once tally poll result shows it reconciled (%v)", r.Poll, e)
		case e.Status == http.StatusServiceUnavailable:
			return fmt.Errorf("the node cannot serve the proof now: try again later, or ask another node (%v)", e)
		}
		return e
	}
}
