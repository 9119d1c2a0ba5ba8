package buddy

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"tally/ledger"
)

// Subject is the copy subject of one full node (replica): the primaries
// whose buddy it is send their batches there.
func Subject(cluster, replica string) string { return "tally." + cluster + ".buddy." + replica }

// ServerConfig configures Serve.
type ServerConfig struct {
	Conn             *nats.Conn
	Cluster, Replica string // the subject: this node's (Subject)
	Store            *Store
	// Seal and Open authenticate the messages with the cluster's keyring,
	// as the relay's are: a message that does not open is dropped.
	Seal func([]byte) []byte
	Open func([]byte) ([]byte, error)
	// KeyOf returns the public key a replica is known by (the one it
	// announced to the cluster): a copy whose signed heads another key
	// signed is refused. A replica not known yet is stored as it comes;
	// certification checks the heads against the key it knows. nil: none
	// checked here.
	KeyOf   func(replica string) (ed25519.PublicKey, bool)
	Metrics *Metrics
	Logger  *slog.Logger
	// Stored, when set, is given each request's records once they are
	// fsynced and before the answer: the node applies their ballots, so
	// that a retry failing over to this buddy finds the key even before
	// gossip brings it. It runs on the subscription's goroutine.
	Stored func(recs []ledger.Record)
}

// Server is a buddy's side: it stores the batches its primaries send.
type Server struct {
	cfg ServerConfig
	sub *nats.Subscription
}

// Serve subscribes to the node's copy subject. NATS calls the handler
// for one message at a time, so each primary's batches are stored in the
// order it sent them. Close stops it.
func Serve(cfg ServerConfig) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg}
	sub, err := cfg.Conn.Subscribe(Subject(cfg.Cluster, cfg.Replica), s.receive)
	if err != nil {
		return nil, fmt.Errorf("buddy: subscribe: %w", err)
	}
	s.sub = sub
	// The subscription is at the server when this returns, so a primary
	// that ranks this node first finds it. Disconnected, the client
	// replays it on reconnect; the error is not the caller's to handle.
	_ = cfg.Conn.FlushTimeout(time.Second)
	return s, nil
}

// Close unsubscribes once the message in hand is answered.
func (s *Server) Close() error { return s.sub.Drain() }

func (s *Server) receive(m *nats.Msg) {
	body, err := s.cfg.Open(m.Data)
	if err != nil {
		s.cfg.Metrics.refused("unsealed")
		return // not from the cluster: no answer
	}
	req, err := decodeRequest(body)
	if err != nil {
		s.cfg.Metrics.refused("malformed")
		s.cfg.Logger.Warn("buddy: a copy request that does not decode", "err", err)
		return
	}
	from, recs := req.From, req.Recs
	if why := s.foreignKey(req); why != "" {
		s.cfg.Metrics.refused("signature")
		s.cfg.Logger.Error("buddy: a copy not signed by its replica's key is refused", "from", from, "reason", why)
		s.respond(m, reply{Status: statusRefuse, Reason: why})
		return
	}
	rep, err := s.cfg.Store.take(req)
	if err != nil {
		// The store could not write: no answer, the primary tries again
		// or says its votes are not copied.
		s.cfg.Metrics.refused("store")
		s.cfg.Logger.Error("buddy: cannot store a copy", "from", from, "err", err)
		return
	}
	if rep.Status == statusOK {
		s.cfg.Metrics.stored(len(recs))
		if s.cfg.Stored != nil {
			s.cfg.Stored(recs)
		}
	} else if rep.Status == statusRefuse {
		s.cfg.Metrics.refused("conflict")
		s.cfg.Logger.Error("buddy: a copy conflicts with the stored chain", "from", from, "reason", rep.Reason)
	}
	s.respond(m, rep)
}

func (s *Server) respond(m *nats.Msg, rep reply) {
	if err := m.Respond(s.cfg.Seal(appendReply(nil, rep))); err != nil {
		s.cfg.Logger.Warn("buddy: reply", "err", err)
	}
}

// foreignKey says why a request's signed heads are not its sender's, by
// the key the sender is known by ("" when they are, or it is not known).
func (s *Server) foreignKey(req request) string {
	if s.cfg.KeyOf == nil {
		return ""
	}
	pub, ok := s.cfg.KeyOf(req.From)
	if !ok {
		return ""
	}
	for _, h := range req.Heads {
		if !bytes.Equal(h.Pub, pub) {
			return fmt.Sprintf("the signed head of %s/%s is signed by key %s, not by the key %s is known by (%s)",
				h.Poll, h.Replica, h.KeyID(), req.From, (&ledger.SignedHead{Pub: pub}).KeyID())
		}
	}
	return ""
}
