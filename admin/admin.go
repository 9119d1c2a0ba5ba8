package admin

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"iter"
	"time"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
	"tally/state"
)

// ErrConfig reports a Config that cannot run.
var ErrConfig = errors.New("admin: config")

// DefaultMaxBody bounds a poll definition's request body.
const DefaultMaxBody = 16 << 10

// Exporter is what the ledger export needs of the vote ledger.
type Exporter interface {
	ExportSigned(w io.Writer, poll string, key ed25519.PrivateKey) (int, error)
	ExportStream(w io.Writer, poll string) (int, error)
	ExportStreamAfter(w io.Writer, poll, replica string, after uint64) (int, error)
	Replica() string
}

var _ Exporter = (*ledger.Ledger)(nil)

// Config configures a Host. State, Clock and Ledger are required.
type Config struct {
	State  *state.State
	Clock  *hlc.Clock
	Ledger Exporter
	// SigningKey signs this replica's chain heads in NDJSON exports; nil:
	// exports go unsigned.
	SigningKey ed25519.PrivateKey
	// MaxBody bounds a poll definition's body; 0: DefaultMaxBody. (A
	// quiz's is MaxQuizBody.)
	MaxBody int64
	// Now is the wall clock that decides what a view shows; nil:
	// time.Now.
	Now func() time.Time
	// Fence makes this node's ledger final for a poll (ingest's
	// Pipeline.Fence): a ledger export with fence= calls it before reading
	// (certification, docs/certification.md); nil: fence= is refused.
	Fence func(poll string, wall int64) error
	// Copies, at a full node of a cluster, is its store of the other full
	// nodes' chains (package buddy): a ledger export with copy_of= reads
	// from it. nil: copy_of= is refused.
	Copies Copies
	// Closed, when set, makes a close written here hold everywhere it can
	// before it is answered: this node's votes in flight answered, the
	// new definition pushed to every full node and confirmed (package
	// node wires ingest and gossip). It returns what to tell the host.
	Closed func(ctx context.Context, poll string) *api.CloseReport
}

// Copies reads a full node's copies of other replicas' chains.
type Copies interface {
	// Copy returns the copy of replica's chain of poll above seq after,
	// up to the replica's signed head, and that head (nil: none kept).
	Copy(poll, replica string, after uint64) (iter.Seq2[ledger.Record, error], *ledger.SignedHead, error)
}

// Host serves the administration endpoints over a node's state.
type Host struct {
	cfg Config
}

// New returns a Host.
func New(cfg Config) (*Host, error) {
	if cfg.State == nil || cfg.Clock == nil || cfg.Ledger == nil {
		return nil, fmt.Errorf("%w: State, Clock and Ledger are required", ErrConfig)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Host{cfg: cfg}, nil
}
