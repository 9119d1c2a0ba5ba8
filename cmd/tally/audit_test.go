package main

import (
	"crypto/ed25519"
	"encoding/json"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
)

// lostReplicaCertificate is the certified result of writeExports' two
// replicas, us-1 read from the copy eu-1 holds (its node was gone).
func lostReplicaCertificate(t *testing.T, files []string) api.ResultView {
	t.Helper()
	var streams []iter.Seq2[ledger.Record, error]
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		streams = append(streams, ledger.ReadNDJSON(f))
	}
	res, err := ledger.ReconcileWith(ledger.ReconcileConfig{Poll: "final"}, streams...)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(nil)
	cert := ledger.Certificate{Poll: "final", Status: "reconciled", TS: hlc.Timestamp{Wall: 5, Replica: "eu-1"}, By: "eu-1", Total: res.Total, Digest: res.Digest}
	cert.Sig = ed25519.Sign(priv, cert.SigningBytes())
	return api.ResultView{
		Poll: "final", Status: "reconciled", CertifiedBy: "eu-1", Total: res.Total, Totals: res.Totals, Digest: res.Digest,
		Detail: &api.ResultDetail{
			Result:      res,
			FromCopy:    []api.CopySource{{Replica: "us-1", Holder: "eu-1", Records: 50}},
			Coordinator: "eu-1",
		},
		Certificate: &cert, CertifierKey: pub,
	}
}

// fakeNode serves a poll's certificate and eu-1's ledger, its own
// records and its copy of us-1's; it records the queries it was asked.
func fakeNode(t *testing.T, v api.ResultView, own, copyOfUS string) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var asked []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/polls/final/result", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(v)
	})
	mux.HandleFunc("GET /v1/polls/final/ledger", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.RawQuery)
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":"unauthorized","message":"admin token required"}}`))
			return
		}
		name := own
		switch r.URL.Query().Get("copy_of") {
		case "":
		case "us-1":
			name = copyOfUS
		default:
			name = "" // holds no copy of it: none of its records
		}
		if name != "" {
			b, _ := os.ReadFile(name)
			w.Write(b)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), asked...) }
}

// TestResultNamesTheReplicaFromACopy: exports without the replica the
// certificate read from a copy do not reproduce it, and the result says
// which replica is missing and how to export it; with the copy they do.
func TestResultNamesTheReplicaFromACopy(t *testing.T) {
	files := writeExports(t) // eu-1, us-1
	v := lostReplicaCertificate(t, files)
	srv, _ := fakeNode(t, v, files[0], files[1])

	out, stderr, code := runCLI(t, "poll", "result", "--url", srv.URL, "--poll", "final", files[0])
	if code != 1 || !strings.Contains(out, "NOT REPRODUCED") || !strings.Contains(out, "MISSING replica us-1") ||
		!strings.Contains(out, "exported from a copy: use tally ledger export --copy-of us-1") {
		t.Fatalf("without the copy: %d\n%s%s", code, out, stderr)
	}
	if !strings.Contains(out, "FROM COPY replica us-1 ← eu-1") {
		t.Fatalf("the result does not show from_copy:\n%s", out)
	}
	out, stderr, code = runCLI(t, "poll", "result", "--url", srv.URL, "--poll", "final", files[0], files[1])
	if code != 0 || !strings.Contains(out, "reproduced: 2 files give the same digest") {
		t.Fatalf("with the copy: %d\n%s%s", code, out, stderr)
	}

	// ledger merge against the certificate, as a file.
	certFile := filepath.Join(t.TempDir(), "cert.json")
	b, _ := json.Marshal(v)
	os.WriteFile(certFile, b, 0o644)
	out, stderr, code = runCLI(t, "ledger", "merge", "--certificate", certFile, files[0])
	if code != 1 || !strings.Contains(out, "MISSING replica us-1") || !strings.Contains(out, "--copy-of us-1") {
		t.Fatalf("merge without the copy: %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = runCLI(t, "ledger", "merge", "--certificate", certFile, files[0], files[1])
	if code != 0 || !strings.Contains(out, "reproduced: the certificate's digest "+v.Digest) {
		t.Fatalf("merge with the copy: %d\n%s%s", code, out, stderr)
	}
	// Without a certificate there is nothing to compare: as before.
	if out, stderr, code := runCLI(t, "ledger", "merge", files[0]); code != 0 || strings.Contains(out, "MISSING") {
		t.Fatalf("merge alone: %d\n%s%s", code, out, stderr)
	}
}

// TestExportFetchesCopies: export fetches each copy the certificate was
// read from, and each --copy-of, from the copy_of endpoint, with the
// admin token; the files then reproduce the certificate.
func TestExportFetchesCopies(t *testing.T) {
	files := writeExports(t)
	v := lostReplicaCertificate(t, files)
	srv, asked := fakeNode(t, v, files[0], files[1])

	dir := t.TempDir()
	_, stderr, code := runCLI(t, "ledger", "export", "--url", srv.URL, "--poll", "final", "--token", "tok", "-o", dir)
	if code != 0 {
		t.Fatalf("export: %d %s", code, stderr)
	}
	if got := asked(); len(got) != 2 || got[1] != "copy_of=us-1" {
		t.Fatalf("asked %q", got)
	}
	copyFile := filepath.Join(dir, "copy-us-1-final.ndjson")
	if b, err := os.ReadFile(copyFile); err != nil || !strings.Contains(string(b), `"replica":"us-1"`) {
		t.Fatalf("copy file: %v\n%s", err, stderr)
	}
	got, _ := filepath.Glob(filepath.Join(dir, "*.ndjson"))
	out, stderr, code := runCLI(t, append([]string{"poll", "result", "--url", srv.URL, "--poll", "final"}, got...)...)
	if code != 0 || !strings.Contains(out, "reproduced: 2 files give") {
		t.Fatalf("exports %v: %d\n%s%s", got, code, out, stderr)
	}

	// --copy-of alone, without the certificate's.
	dir = t.TempDir()
	_, stderr, code = runCLI(t, "ledger", "export", "--url", srv.URL, "--poll", "final", "--token", "tok", "--certified-copies=false", "--copy-of", "us-1", "-o", dir)
	if code != 0 || len(asked()) != 4 || asked()[3] != "copy_of=us-1" {
		t.Fatalf("--copy-of: %d %q %s", code, asked(), stderr)
	}
	// A replica no node holds a copy of is an error naming it.
	_, stderr, code = runCLI(t, "ledger", "export", "--url", srv.URL, "--poll", "final", "--token", "tok", "--certified-copies=false", "--copy-of", "ap-1", "-o", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "replica ap-1") {
		t.Fatalf("--copy-of ap-1: %d %s", code, stderr)
	}
	// Without the token, the copy endpoint refuses it.
	_, stderr, code = runCLI(t, "ledger", "export", "--url", srv.URL, "--poll", "final", "-o", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "admin token required") {
		t.Fatalf("no token: %d %s", code, stderr)
	}
}
