package gossip

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"tally/crdt"
	"tally/hlc"
	"tally/ids"
	"tally/internal/wire"
	"tally/poll"
	"tally/state"
)

// ErrMalformed is returned for a gossip message that cannot be decoded.
// Such a message is dropped and counted, never merged.
var ErrMalformed = errors.New("gossip: malformed message")

// Kind says which path a message was made for.
type Kind byte

const (
	// KindDelta carries the sender's own entries changed since its last
	// delta (the NATS fast path), or nothing (a heartbeat).
	KindDelta Kind = 1
	// KindFull carries everything the sender holds (memberlist push/pull).
	KindFull Kind = 2
)

// Limits the decoder enforces, so a hostile peer cannot make a node
// allocate without bound.
const (
	MaxMessage   = 32 << 20 // bytes of a decoded (decompressed) message
	MaxPolls     = 1 << 16  // polls in one message
	maxDefBytes  = 64 << 10
	maxTallySize = 4 << 20
	maxCertBytes = 256 << 10
	compressOver = 1 << 10 // bodies larger than this are deflated

	wireMagic = "TG4"
	// wireMagicJoiners marks a message whose polls also carry the newest
	// joiners of a quiz's lobby (after the viewers). A message without
	// joiners is still written as TG4, so a node of the release before
	// reads every message but those.
	wireMagicJoiners = "TG5"
	// wireMagicHolders marks a message whose joiners also say who each is
	// (state.Joiner.Holder), so every node keeps their names as theirs.
	// A message with joiners is written as TG6; a TG5 one is still read
	// (its joiners say no holder).
	wireMagicHolders = "TG6"
	flagDeflated     = 1
	knownFlags       = flagDeflated
	headerLength     = len(wireMagic) + 2
	maxIDLength      = ids.MaxLen
	minPollRecord    = 6 // id length + empty def, tally, certificate, ballots and viewers
	maxViewers       = 1 << 31
)

// Message is one gossip message: who sent it, when by its clock, and a
// state update per poll.
type Message struct {
	Kind    Kind
	Replica string        // the sender's replica id
	Region  string        // the sender's region
	Sent    hlc.Timestamp // the sender's clock when it sent
	Polls   []PollUpdate
}

// PollUpdate is what a message says about one poll. Any part may be
// absent.
type PollUpdate struct {
	ID    string
	Def   *crdt.Register[poll.Definition]
	Tally *crdt.Tally
	Cert  *state.Certificate
	// Ballots are votes' effects on voter state: the sender's own new
	// ones in a delta, another replica's in a catch-up reply.
	Ballots []crdt.Ballot
	// Viewers is how many viewers of the poll the sender serves.
	Viewers *int64
	// Joiners are the newest participants who joined the quiz (whose first
	// question this poll is) at the sender's sockets, newest first, at most
	// state.MaxJoiners; nil: not reported, empty: none.
	Joiners []state.Joiner
}

// Encode writes m in the wire format: a magic and version, the kind, a
// flags byte, then the body (deflated when it is large): sender, clock,
// and per poll its id, the definition register as JSON, the tally in
// crdt's binary form, the certificate as JSON and the ballots (see
// appendBallots), each length-prefixed (length 0: absent), then the
// sender's viewers of the poll as a uvarint plus one (0: absent), and in
// a TG6 message the joiners: their count plus one (0: absent), then each
// one's name, time, sequence and holder (TG5: no holder).
func Encode(m *Message) ([]byte, error) {
	joiners := false
	for _, p := range m.Polls {
		if p.Joiners != nil {
			if len(p.Joiners) > state.MaxJoiners {
				return nil, fmt.Errorf("gossip: %d joiners of %q in one message, at most %d", len(p.Joiners), p.ID, state.MaxJoiners)
			}
			joiners = true
		}
	}
	body := make([]byte, 0, 256)
	body = wire.AppendString(body, m.Replica)
	body = wire.AppendString(body, m.Region)
	body = binary.AppendUvarint(body, uint64(max(m.Sent.Wall, 0)))
	body = binary.AppendUvarint(body, uint64(m.Sent.Logical))
	body = binary.AppendUvarint(body, uint64(len(m.Polls)))
	for _, p := range m.Polls {
		body = wire.AppendString(body, p.ID)
		var def, tally []byte
		var err error
		if p.Def != nil {
			if def, err = json.Marshal(p.Def); err != nil {
				return nil, fmt.Errorf("gossip: encode definition of %q: %w", p.ID, err)
			}
		}
		if p.Tally != nil {
			if tally, err = p.Tally.MarshalBinary(); err != nil {
				return nil, fmt.Errorf("gossip: encode tally of %q: %w", p.ID, err)
			}
		}
		var cert []byte
		if p.Cert != nil {
			if cert, err = json.Marshal(p.Cert); err != nil {
				return nil, fmt.Errorf("gossip: encode certificate of %q: %w", p.ID, err)
			}
		}
		var ballots []byte
		if len(p.Ballots) > 0 {
			if len(p.Ballots) > MaxBallots {
				return nil, fmt.Errorf("gossip: %d ballots of %q in one message, at most %d", len(p.Ballots), p.ID, MaxBallots)
			}
			ballots = appendBallots(nil, p.Ballots)
		}
		body = wire.AppendBytes(body, def)
		body = wire.AppendBytes(body, tally)
		body = wire.AppendBytes(body, cert)
		body = wire.AppendBytes(body, ballots)
		var viewers uint64
		if p.Viewers != nil {
			viewers = uint64(min(max(*p.Viewers, 0), maxViewers)) + 1
		}
		body = binary.AppendUvarint(body, viewers)
		if joiners {
			body = appendJoiners(body, p.Joiners)
		}
	}
	magic := wireMagic
	if joiners {
		magic = wireMagicHolders
	}
	out := append(make([]byte, 0, headerLength+len(body)), magic...)
	out = append(out, byte(m.Kind))
	if len(body) <= compressOver {
		return append(append(out, 0), body...), nil
	}
	buf := bytes.NewBuffer(append(out, flagDeflated))
	w, _ := flate.NewWriter(buf, flate.BestSpeed)
	w.Write(body)
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("gossip: compress: %w", err)
	}
	return buf.Bytes(), nil
}

// Decode reads a message written by Encode. Anything malformed, truncated,
// oversized or inconsistent (a definition whose id is not the poll's, an
// invalid definition, a timestamp of zero) is rejected with ErrMalformed.
func Decode(b []byte) (*Message, error) {
	withJoiners, withHolders, err := readMagic(b)
	if err != nil {
		return nil, err
	}
	m := &Message{Kind: Kind(b[len(wireMagic)])}
	if m.Kind != KindDelta && m.Kind != KindFull {
		return nil, fmt.Errorf("%w: unknown kind %d", ErrMalformed, m.Kind)
	}
	flags := b[len(wireMagic)+1]
	if flags&^knownFlags != 0 {
		return nil, fmt.Errorf("%w: unknown flags %#x", ErrMalformed, flags)
	}
	body := b[headerLength:]
	if flags&flagDeflated != 0 {
		r := flate.NewReader(bytes.NewReader(body))
		defer r.Close()
		body, err = io.ReadAll(io.LimitReader(r, MaxMessage+1))
		if err != nil {
			return nil, fmt.Errorf("%w: inflate: %v", ErrMalformed, err)
		}
	}
	if len(body) > MaxMessage {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrMalformed, MaxMessage)
	}
	d := wire.NewReader(body, ErrMalformed)
	m.Replica = readID(d, "replica")
	m.Region = readID(d, "region")
	wall, logical := d.Uvarint(), d.Uvarint()
	if d.Err() == nil && (wall > math.MaxInt64 || logical > math.MaxUint32) {
		d.Fail("clock out of range")
	}
	m.Sent = hlc.Timestamp{Wall: int64(wall), Logical: uint32(logical), Replica: m.Replica}
	n := d.Uvarint()
	if d.Err() == nil && (n > MaxPolls || n > uint64(d.Len())/minPollRecord) {
		d.Fail("%d polls", n)
	}
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		p := PollUpdate{ID: readID(d, "poll id")}
		if def := d.LenBytes(maxDefBytes, "definition"); len(def) > 0 && d.Err() == nil {
			p.Def = decodeDefinition(d, p.ID, def)
		}
		if raw := d.LenBytes(maxTallySize, "tally"); len(raw) > 0 && d.Err() == nil {
			t, err := crdt.DecodeTally(raw)
			if err != nil {
				d.Fail("tally of %q: %v", p.ID, err)
			}
			p.Tally = t
		}
		if raw := d.LenBytes(maxCertBytes, "certificate"); len(raw) > 0 && d.Err() == nil {
			p.Cert = decodeCertificate(d, p.ID, raw)
		}
		if raw := d.LenBytes(MaxMessage, "ballots"); len(raw) > 0 && d.Err() == nil {
			p.Ballots = decodeBallots(d, raw)
		}
		if v := d.Uvarint(); v > 0 && d.Err() == nil {
			if v > maxViewers+1 {
				d.Fail("%d viewers of %q", v-1, p.ID)
			}
			n := int64(v - 1)
			p.Viewers = &n
		}
		if withJoiners {
			p.Joiners = readJoiners(d, p.ID, withHolders)
		}
		m.Polls = append(m.Polls, p)
	}
	if d.Err() == nil && d.Len() != 0 {
		d.Fail("%d trailing bytes", d.Len())
	}
	if d.Err() != nil {
		return nil, d.Err()
	}
	return m, nil
}

// readMagic reads which release's format b is in: TG4 (no joiners), TG5
// (joiners) or TG6 (joiners with their holders).
func readMagic(b []byte) (joiners, holders bool, err error) {
	if len(b) < headerLength {
		return false, false, fmt.Errorf("%w: bad magic", ErrMalformed)
	}
	switch string(b[:len(wireMagic)]) {
	case wireMagic:
		return false, false, nil
	case wireMagicJoiners:
		return true, false, nil
	case wireMagicHolders:
		return true, true, nil
	}
	return false, false, fmt.Errorf("%w: bad magic", ErrMalformed)
}

func decodeDefinition(d *wire.Reader, id string, raw []byte) *crdt.Register[poll.Definition] {
	var reg crdt.Register[poll.Definition]
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&reg); err != nil {
		d.Fail("definition of %q: %v", id, err)
		return nil
	}
	if dec.More() {
		d.Fail("definition of %q: trailing data", id)
		return nil
	}
	switch {
	case reg.TS.Wall <= 0:
		d.Fail("definition of %q has no timestamp", id)
	case reg.Value.ID != id:
		d.Fail("definition under %q is for %q", id, reg.Value.ID)
	default:
		if err := reg.Value.Validate(); err != nil {
			d.Fail("definition of %q: %v", id, err)
		}
	}
	return &reg
}

func decodeCertificate(d *wire.Reader, id string, raw []byte) *state.Certificate {
	var c state.Certificate
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || dec.More() {
		d.Fail("certificate of %q: %v", id, err)
		return nil
	}
	if err := c.Validate(); err != nil || c.Poll != id {
		d.Fail("certificate under %q (for %q): %v", id, c.Poll, err)
		return nil
	}
	return &c
}

// readID reads a length-prefixed string that must be a valid id.
func readID(d *wire.Reader, what string) string {
	s := d.String(maxIDLength, what)
	if d.Err() != nil {
		return ""
	}
	if err := ids.Valid(s); err != nil {
		d.Fail("%s: %v", what, err)
		return ""
	}
	return s
}

// appendJoiners writes a poll's joiners: nil as 0, else their count plus
// one and each one's name, join time, sequence and holder.
func appendJoiners(b []byte, js []state.Joiner) []byte {
	if js == nil {
		return binary.AppendUvarint(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(js))+1)
	for _, j := range js {
		b = wire.AppendString(b, j.Name)
		b = binary.AppendUvarint(b, uint64(max(j.AtMs, 0)))
		b = binary.AppendUvarint(b, j.Seq)
		b = binary.AppendUvarint(b, j.Holder)
	}
	return b
}

// readJoiners reads what appendJoiners wrote (without holders: a TG5
// message's): at most state.MaxJoiners, each a valid display name with a
// time in range.
func readJoiners(d *wire.Reader, id string, holders bool) []state.Joiner {
	n := d.Uvarint()
	if n == 0 || d.Err() != nil {
		return nil
	}
	if n-1 > state.MaxJoiners {
		d.Fail("%d joiners of %q", n-1, id)
		return nil
	}
	js := make([]state.Joiner, 0, n-1)
	for range n - 1 {
		name := d.String(state.MaxJoinerName, "joiner's name")
		at, seq := d.Uvarint(), d.Uvarint()
		var holder uint64
		if holders {
			holder = d.Uvarint()
		}
		if d.Err() != nil {
			return nil
		}
		if err := state.ValidJoinerName(name); err != nil {
			d.Fail("joiner of %q: name %v", id, err)
			return nil
		}
		if at > math.MaxInt64 {
			d.Fail("joiner of %q: time out of range", id)
			return nil
		}
		js = append(js, state.Joiner{Name: name, AtMs: int64(at), Seq: seq, Holder: holder})
	}
	return js
}
