package api

import (
	"tally/ledger"
	"tally/quiz"
	"tally/receipt"
)

// ResultView is the body of GET /v1/polls/{poll}/result (and of POST
// …/certify): a poll's certification as a node knows it.
type ResultView struct {
	Poll        string            `json:"poll"`
	Status      string            `json:"status"` // reconciled or pending
	Reason      string            `json:"reason,omitempty"`
	Coordinator string            `json:"coordinator,omitempty"`
	CertifiedBy string            `json:"certified_by,omitempty"` // replica
	DecidedAt   int64             `json:"decided_at,omitempty"`   // certificate time, Unix ms
	Totals      map[string]uint64 `json:"totals,omitempty"`
	Total       uint64            `json:"total,omitempty"`
	Digest      string            `json:"digest,omitempty"`
	Detail      *ResultDetail     `json:"detail,omitempty"`
	// Certificate is the signed certificate as held, and CertifierKey the
	// Ed25519 key of the replica that signed it (as it announced it): an
	// auditor checks Certificate.Sig over Certificate.SigningBytes() with
	// it, and compares the key with that replica's signed export heads.
	Certificate  *ledger.Certificate `json:"certificate,omitempty"`
	CertifierKey []byte              `json:"certifier_key,omitempty"`
}

// Exclusion is a replica left out of a certification by an operator.
type Exclusion struct {
	Replica string `json:"replica"`
	Reason  string `json:"reason"`
}

// Lost is a replica's acknowledged records that no ledger holds any more
// (its node was restored from an older backup), certified without by an
// operator's decision: the records From..To of its chain, Count of them.
type Lost struct {
	Replica string `json:"replica"`
	From    uint64 `json:"from_seq"`
	To      uint64 `json:"to_seq"`
	Count   uint64 `json:"count"`
	Reason  string `json:"reason"`
}

// CopySource is a replica certified from a copy of its chain: its node
// was not a live member, and Holder (a full node it copied to, package
// buddy) held Records of its records.
type CopySource struct {
	Replica string `json:"replica"`
	Holder  string `json:"holder"`
	Records uint64 `json:"records"`
}

// Missing is a replica whose records could not all be collected.
type Missing struct {
	Replica  string `json:"replica"`
	Expected uint64 `json:"expected"` // records the gossiped count says it holds
	Received uint64 `json:"received"`
	Error    string `json:"error"`
}

// ResultDetail is a certificate's full account (its Detail).
type ResultDetail struct {
	Result   *ledger.Result `json:"result,omitempty"`
	Missing  []Missing      `json:"missing,omitempty"`
	Excluded []Exclusion    `json:"excluded,omitempty"`
	Lost     []Lost         `json:"lost,omitempty"`
	// FromCopy names each replica whose chain was read from a buddy's
	// copy, its own ledger gone (docs/certification.md, "From a copy").
	FromCopy    []CopySource `json:"from_copy,omitempty"`
	Coordinator string       `json:"coordinator"` // the node that certified
	ClosesAt    int64        `json:"closes_at"`
	// Tree is a reconciled certificate's signed tree head: the Merkle
	// tree over Result's records, which a voter's receipt is checked
	// against (docs/auditing.md, "Receipts"). Absent from certificates
	// of releases before v0.6.0.
	Tree *receipt.TreeHead `json:"tree,omitempty"`
}

// Leaderboard is GET /v1/quizzes/{quiz}/leaderboard: the quiz's ranking
// over the questions certified and revealed so far (docs/quiz.md). It is computed from
// the certified results, so every region shows the same one, and the
// auditor reproduces it from the exports.
type Leaderboard struct {
	Quiz         string          `json:"quiz"`
	Standings    []quiz.Standing `json:"standings"` // the top ?top= (default 10)
	Participants int             `json:"participants"`
	Counted      []int           `json:"counted"` // question indexes whose certified answers are in
	Pending      []int           `json:"pending"` // closed, and not certified or not revealed yet
	// Final is set once every question is closed and certified.
	Final bool `json:"final"`
	// Digest is quiz.Digest of the whole ranking (not only the top):
	// `tally quiz result` reproduces it from the exports.
	Digest string `json:"digest"`
	// You is the standing of ?participant= (a voter id), when ranked.
	You *quiz.Standing `json:"you,omitempty"`
}
