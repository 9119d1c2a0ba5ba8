package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// ErrConfig is returned for TLS files that cannot be used.
var ErrConfig = errors.New("tlsconf: bad TLS configuration")

// Files names a node's TLS files (PEM).
type Files struct {
	Cert, Key string // this node's certificate chain and private key
	// CA verifies the peers (their HTTP servers, their NATS routes and
	// gateways, and their client certificates there); empty: the
	// system's roots.
	CA string
}

// Identity is a node's certificate, reloaded when its files change, and
// the pool that verifies its peers.
type Identity struct {
	files Files
	pool  *x509.CertPool // nil: the system roots
	// Every is how often the files are checked for a change; 0: 10 s.
	Every time.Duration
	// OnReload, when set, is told about each reload (err nil) or failed
	// reload (the previous certificate stays in use).
	OnReload func(err error)

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]time.Time // modification times of Cert and Key when read
	checked time.Time
}

// Load reads the files once; an error names the file and what is wrong.
func Load(f Files) (*Identity, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, fmt.Errorf("%w: --tls-cert and --tls-key go together", ErrConfig)
	}
	id := &Identity{files: f}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("%w: --tls-ca: %v", ErrConfig, err)
		}
		id.pool = x509.NewCertPool()
		if !id.pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: --tls-ca %s holds no PEM certificate", ErrConfig, f.CA)
		}
	}
	cert, stamp, err := id.read()
	if err != nil {
		return nil, err
	}
	id.cert, id.stamp, id.checked = cert, stamp, time.Now()
	return id, nil
}

func (id *Identity) read() (*tls.Certificate, [2]time.Time, error) {
	var stamp [2]time.Time
	for i, name := range []string{id.files.Cert, id.files.Key} {
		fi, err := os.Stat(name)
		if err != nil {
			return nil, stamp, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		stamp[i] = fi.ModTime()
	}
	cert, err := tls.LoadX509KeyPair(id.files.Cert, id.files.Key)
	if err != nil {
		return nil, stamp, fmt.Errorf("%w: --tls-cert %s / --tls-key %s: %v", ErrConfig, id.files.Cert, id.files.Key, err)
	}
	if cert.Leaf != nil && time.Now().After(cert.Leaf.NotAfter) {
		return nil, stamp, fmt.Errorf("%w: --tls-cert %s expired on %s", ErrConfig, id.files.Cert, cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return &cert, stamp, nil
}

// Certificate returns the current certificate, reading the files again
// if they changed since the last check (at most once per Every).
func (id *Identity) Certificate() *tls.Certificate {
	id.mu.Lock()
	defer id.mu.Unlock()
	every := id.Every
	if every <= 0 {
		every = 10 * time.Second
	}
	if time.Since(id.checked) < every {
		return id.cert
	}
	id.checked = time.Now()
	changed := false
	for i, name := range []string{id.files.Cert, id.files.Key} {
		if fi, err := os.Stat(name); err == nil && !fi.ModTime().Equal(id.stamp[i]) {
			changed = true
		}
	}
	if !changed {
		return id.cert
	}
	cert, stamp, err := id.read()
	if err == nil {
		id.cert, id.stamp = cert, stamp
	}
	if id.OnReload != nil {
		id.OnReload(err)
	}
	return id.cert
}

// Server is the configuration of an HTTP listener: the node's
// certificate, TLS 1.2 at least. Clients are not asked for certificates
// (viewers' browsers have none; peers authenticate with the cluster
// credential inside the encrypted connection).
func (id *Identity) Server() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return id.Certificate(), nil },
	}
}

// Client is the configuration for calling a peer: its certificate is
// verified against the CA (or the system roots) and its address, and this
// node's certificate is offered if asked for.
func (id *Identity) Client() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		RootCAs:              id.pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return id.Certificate(), nil },
	}
}

// Mutual is the configuration of a link where both ends are nodes (NATS
// routes and gateways): each presents its certificate, each verifies the
// other's against the CA.
func (id *Identity) Mutual() *tls.Config {
	c := id.Client()
	c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return id.Certificate(), nil }
	c.ClientCAs = id.pool
	c.ClientAuth = tls.RequireAndVerifyClientCert
	return c
}

// ClientOnly is the configuration for a server this node only calls (an
// external NATS): verified against caFile (empty: the system roots),
// presenting certFile and keyFile when both are given.
func ClientOnly(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrConfig, caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%w: a client certificate needs both its certificate and its key", ErrConfig)
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %s / %s: %v", ErrConfig, certFile, keyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
