package tlsconf

import (
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/internal/testtls"
)

func TestLoadRefusesUnusableFiles(t *testing.T) {
	ca := testtls.NewCA(t, "cluster")
	good := ca.Issue(t, "node")
	other := ca.Issue(t, "other")
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"), 0o600)
	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, nil, 0o600)
	expired := ca.IssueExpired(t, "old")
	for name, f := range map[string]Files{
		"cert without key":    {Cert: good.Cert},
		"key without cert":    {Key: good.Key},
		"missing cert":        {Cert: filepath.Join(dir, "nope.pem"), Key: good.Key},
		"garbage cert":        {Cert: garbage, Key: good.Key},
		"empty key":           {Cert: good.Cert, Key: empty},
		"key of another cert": {Cert: good.Cert, Key: other.Key},
		"missing CA":          {Cert: good.Cert, Key: good.Key, CA: filepath.Join(dir, "nope.pem")},
		"CA without PEM":      {Cert: good.Cert, Key: good.Key, CA: empty},
		"CA is garbage":       {Cert: good.Cert, Key: good.Key, CA: garbage},
		"expired cert":        {Cert: expired.Cert, Key: expired.Key},
	} {
		if _, err := Load(f); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", name, err)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", name, err)
		}
	}
	if _, err := Load(Files{Cert: good.Cert, Key: good.Key, CA: ca.File}); err != nil {
		t.Fatal(err)
	}
}

// serve starts an HTTPS server with id's Server config and returns a
// client that trusts ca through id.Client().
func serve(t *testing.T, id *Identity) (string, *http.Client) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", id.Server())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String(), &http.Client{Transport: &http.Transport{TLSClientConfig: id.Client(), DisableKeepAlives: true}, Timeout: 5 * time.Second}
}

func servedSerial(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	return res.TLS.PeerCertificates[0].SerialNumber.String()
}

// A renewed certificate is served once its files change, without a
// restart; a half-written renewal keeps the previous certificate.
func TestRenewedCertificateIsServed(t *testing.T) {
	ca := testtls.NewCA(t, "cluster")
	first := ca.Issue(t, "node")
	id, err := Load(Files{Cert: first.Cert, Key: first.Key, CA: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	id.Every = time.Nanosecond
	var reloads []error
	id.OnReload = func(err error) { reloads = append(reloads, err) }
	srv, client := serve(t, id)
	before := servedSerial(t, client, srv)

	// A broken write (the key is not the certificate's): still the old one.
	renewal := ca.Issue(t, "node")
	copyFile(t, renewal.Cert, first.Cert)
	if got := servedSerial(t, client, srv); got != before {
		t.Fatalf("served %s after a half-written renewal, want the previous %s", got, before)
	}
	if len(reloads) == 0 || reloads[len(reloads)-1] == nil {
		t.Fatalf("a failed reload was not reported: %v", reloads)
	}
	copyFile(t, renewal.Key, first.Key)
	touch(t, first.Cert) // both files newer than the failed attempt
	after := servedSerial(t, client, srv)
	if after == before {
		t.Fatal("still serving the previous certificate after the renewal")
	}
	if reloads[len(reloads)-1] != nil {
		t.Fatalf("last reload: %v", reloads[len(reloads)-1])
	}
}

// A client configured with the cluster's CA refuses a server whose
// certificate another CA signed, and a server whose certificate does not
// name the address dialled.
func TestClientVerifiesPeers(t *testing.T) {
	ca := testtls.NewCA(t, "cluster")
	stranger := testtls.NewCA(t, "stranger")
	ours, err := Load(Files{Cert: ca.Issue(t, "node").Cert, Key: "", CA: ca.File})
	if err == nil || ours != nil {
		t.Fatal("loaded without a key")
	}
	mine := ca.Issue(t, "node")
	id, err := Load(Files{Cert: mine.Cert, Key: mine.Key, CA: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	theirs := stranger.Issue(t, "impostor")
	imp, err := Load(Files{Cert: theirs.Cert, Key: theirs.Key})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := serve(t, imp)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: id.Client()}, Timeout: 5 * time.Second}
	if _, err := client.Get(srv); err == nil {
		t.Fatal("the cluster's client trusted a certificate another CA signed")
	}
	good, _ := serve(t, id)
	if _, err := client.Get(good); err != nil {
		t.Fatalf("own CA's server refused: %v", err)
	}
	// The certificate names 127.0.0.1 and localhost, not 127.0.0.2.
	wrongHost := strings.Replace(good, "127.0.0.1", "127.0.0.2", 1)
	cfg := id.Client()
	cfg.ServerName = "tally.example"
	client = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 5 * time.Second}
	if _, err := client.Get(good); err == nil {
		t.Fatalf("a certificate was accepted for a name it does not hold (%s)", wrongHost)
	}
}

// Mutual links refuse a peer that shows no certificate or one from
// another CA.
func TestMutualRequiresAClientCertificate(t *testing.T) {
	ca := testtls.NewCA(t, "cluster")
	mine := ca.Issue(t, "node")
	id, err := Load(Files{Cert: mine.Cert, Key: mine.Key, CA: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", id.Mutual())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	noCert := &tls.Config{RootCAs: id.Client().RootCAs, ServerName: "127.0.0.1"}
	stranger := testtls.NewCA(t, "stranger").Issue(t, "impostor")
	impCert, _ := tls.LoadX509KeyPair(stranger.Cert, stranger.Key)
	foreign := &tls.Config{RootCAs: id.Client().RootCAs, ServerName: "127.0.0.1", Certificates: []tls.Certificate{impCert}}
	for name, cfg := range map[string]*tls.Config{"no certificate": noCert, "another CA's": foreign} {
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err == nil {
			// TLS 1.3 reports the server's refusal on the first read.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: %v, want a certificate error", name, err)
		}
	}
	c, err := tls.Dial("tcp", ln.Addr().String(), id.Mutual())
	if err != nil {
		t.Fatalf("a member's certificate refused: %v", err)
	}
	c.Close()
}

func TestClientOnly(t *testing.T) {
	ca := testtls.NewCA(t, "nats")
	f := ca.Issue(t, "client")
	if _, err := ClientOnly(ca.File, f.Cert, ""); !errors.Is(err, ErrConfig) {
		t.Errorf("cert without key: %v", err)
	}
	if _, err := ClientOnly(f.Key, "", ""); !errors.Is(err, ErrConfig) {
		t.Errorf("a key as CA: %v", err)
	}
	c, err := ClientOnly(ca.File, f.Cert, f.Key)
	if err != nil || c.RootCAs == nil || len(c.Certificates) != 1 {
		t.Fatalf("%v %+v", err, c)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	touch(t, to)
}

// touch moves a file's modification time forward, past the resolution
// of the previous write.
func touch(t *testing.T, name string) {
	t.Helper()
	later := time.Now().Add(time.Duration(len(name)) * time.Millisecond).Add(2 * time.Second)
	if err := os.Chtimes(name, later, later); err != nil {
		t.Fatal(err)
	}
}
