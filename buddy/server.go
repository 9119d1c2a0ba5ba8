package buddy

import (
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
	Seal    func([]byte) []byte
	Open    func([]byte) ([]byte, error)
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
	from, recs, err := decodeRequest(body)
	if err != nil {
		s.cfg.Metrics.refused("malformed")
		s.cfg.Logger.Warn("buddy: a copy request that does not decode", "err", err)
		return
	}
	rep, err := s.cfg.Store.take(from, recs)
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
	if err := m.Respond(s.cfg.Seal(appendReply(nil, rep))); err != nil {
		s.cfg.Logger.Warn("buddy: reply", "err", err)
	}
}
