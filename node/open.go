package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tally/api"
	"tally/hlc"
	"tally/ingest"
	"tally/internal/backup"
	"tally/ledger"
	"tally/session"
)

// The steps of New, in its order, each on one concern.

// fillDefaults gives every zero field that means "the default" its
// default.
func (cfg *Config) fillDefaults() {
	d := DefaultConfig()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Role == "" {
		cfg.Role = d.Role
	}
	if cfg.Region == "" {
		cfg.Region = d.Region
	}
	if cfg.PowBits == 0 {
		cfg.PowBits = d.PowBits
	}
	for _, t := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&cfg.ReadHeaderTimeout, d.ReadHeaderTimeout}, {&cfg.ReadTimeout, d.ReadTimeout},
		{&cfg.WriteTimeout, d.WriteTimeout}, {&cfg.IdleTimeout, d.IdleTimeout}, {&cfg.ShutdownTimeout, d.ShutdownTimeout},
		{&cfg.ForgetEvery, d.ForgetEvery}, {&cfg.Retention, d.Retention}, {&cfg.SessionTTL, d.SessionTTL},
	} {
		if *t.v <= 0 {
			*t.v = t.def
		}
	}
}

// prepareDataDir makes the data dir (0700), checks that it is writable
// and removes what an interrupted backup left.
func prepareDataDir(dir string) error {
	// A data dir that cannot be made or written is a setting to fix, as a
	// bad flag is (exit status 2), said with the flag's name.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: --data-dir %s: cannot create it: %w", ErrConfig, dir, err)
	}
	if err := checkWritable(dir); err != nil {
		return fmt.Errorf("%w: --data-dir %s: not writable: %w", ErrConfig, dir, err)
	}
	if err := backup.RemoveLeftovers(dir); err != nil {
		return fmt.Errorf("node: data dir: %w", err)
	}
	return nil
}

// openClock opens the hybrid clock on its saved mark; a mark that cannot
// be read, or one far ahead of the wall clock, is damage.
func (n *Node) openClock() (err error) {
	cfg := n.cfg
	n.clock, err = hlc.New(hlc.Config{Replica: n.replica, Now: cfg.Now, Store: hlc.FileStore{Path: filepath.Join(cfg.DataDir, hlcFile)}})
	if errors.Is(err, hlc.ErrMalformed) {
		return fmt.Errorf("%w: %w: if this machine's clock is right, move it aside and the clock starts from it", ErrDamaged, err)
	}
	if errors.Is(err, hlc.ErrMarkAhead) {
		return fmt.Errorf("%w: %s: %w: check this machine's clock; if it is right, the file is damaged — move it aside and the clock starts from this machine's", ErrDamaged, filepath.Join(cfg.DataDir, hlcFile), err)
	}
	return err
}

// openLedger opens the Pebble ledger; a damaged one is refused.
func (n *Node) openLedger() (err error) {
	cfg := n.cfg
	if err := openCopies(n); err != nil {
		return err
	}
	var copier ledger.Copier // nil, not a nil *buddy.Sender: one copy
	if n.copies.sender != nil {
		copier = n.copies.sender
	}
	n.ledger, err = ledger.Open(ledger.Config{
		Dir: filepath.Join(cfg.DataDir, ledgerDir), Replica: n.replica, Logger: cfg.Logger,
		OnCommit: func(records int, took time.Duration) {
			n.m.batchRecords.Observe(float64(records))
			n.m.commitSeconds.Observe(took.Seconds())
		},
		Copier: copier,
	})
	if errors.Is(err, ledger.ErrDamaged) {
		return fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	return err
}

// sessionSigner signs voter tokens with --session-secret (a rotation's
// secrets, comma-separated, the first signing), or with the data dir's,
// made with it. known says the data dir is an existing replica's: a
// secret made there now is not the one its tokens were signed with (a
// restore of a backup that did not carry it), and the log says so.
func sessionSigner(cfg Config, known bool) (*session.Signer, error) {
	secret := cfg.SessionSecret
	if secret == "" {
		var err error
		var made bool
		if secret, made, err = readOrCreate(cfg.DataDir, sessionSecretFile, func() (string, error) { return randomHex(32) }); err != nil {
			return nil, fmt.Errorf("node: session secret: %w", err)
		}
		if made && known {
			cfg.Logger.Warn("made a new session secret for an existing replica (no --session-secret, and none in the data dir: restored from a backup that did not carry it?): the voter tokens this node issued before are refused (session_invalid) and voters get new ones; if the old secret is at hand, stop the node and put it in "+sessionSecretFile+" or pass it with --session-secret-file",
				"file", filepath.Join(cfg.DataDir, sessionSecretFile))
		}
	}
	var secrets [][]byte // comma-separated during a rotation: the first signs
	for _, sec := range strings.Split(secret, ",") {
		if sec = strings.TrimSpace(sec); sec != "" {
			secrets = append(secrets, []byte(sec))
		}
	}
	signer, err := session.NewRotatingSigner(secrets, cfg.SessionTTL, cfg.Now)
	if err != nil {
		return nil, fmt.Errorf("%w: --session-secret: %v", ErrConfig, err)
	}
	return signer, nil
}

// readDatacenters reads --datacenter-ranges ("": none).
func readDatacenters(path string) ([]netip.Prefix, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --datacenter-ranges: %v", ErrConfig, err)
	}
	ranges, err := ingest.ReadRanges(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: --datacenter-ranges %s: %v", ErrConfig, path, err)
	}
	return ranges, nil
}

// listenAll opens the public listener and, when set, the admin and debug
// ones, and makes their servers; a taken address is refused naming its
// flag.
func (n *Node) listenAll() (err error) {
	cfg := n.cfg
	if n.listener, err = n.listen(cfg.HTTPAddr); err != nil {
		return fmt.Errorf("%w: --http-addr %s: %v", ErrConfig, cfg.HTTPAddr, err)
	}
	if cfg.AdminAddr != "" {
		if n.adminLn, err = n.listen(cfg.AdminAddr); err != nil {
			n.listener.Close()
			return fmt.Errorf("%w: --admin-addr %s: %v", ErrConfig, cfg.AdminAddr, err)
		}
		n.adminSrv = &http.Server{Handler: api.WithLogger(cfg.Logger, n.adminRoutes()), ReadHeaderTimeout: cfg.ReadHeaderTimeout,
			ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}
	}
	if cfg.DebugAddr != "" {
		// Plain HTTP, whatever --tls-cert says: keep it on loopback.
		if n.debugLn, err = net.Listen("tcp", cfg.DebugAddr); err != nil {
			n.listener.Close()
			if n.adminLn != nil {
				n.adminLn.Close()
			}
			return fmt.Errorf("%w: --debug-addr %s: %v", ErrConfig, cfg.DebugAddr, err)
		}
		n.debugSrv = &http.Server{Handler: debugMux(), ReadHeaderTimeout: 5 * time.Second,
			ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}
	}
	n.srv = &http.Server{
		Handler:           api.WithLogger(cfg.Logger, n.routes()),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return nil
}
