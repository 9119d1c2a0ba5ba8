package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"

	jsonv2 "github.com/go-json-experiment/json"

	"tally/hlc"
)

// MaxLineBytes bounds one NDJSON line; a record never needs more.
const MaxLineBytes = 4096

// recordJSON is a record's export form: one JSON object per line. It
// carries the record's own hash so a reader can check each line alone.
type recordJSON struct {
	Poll    string   `json:"poll"`
	Replica string   `json:"replica"`
	Seq     uint64   `json:"seq"`
	HLC     string   `json:"hlc"`
	Voter   string   `json:"voter"`
	Option  string   `json:"option"`
	Idem    string   `json:"idem"`
	Trust   float64  `json:"trust"`
	Counted bool     `json:"counted"`
	Late    bool     `json:"late"`
	IPHash  string   `json:"ip_hash"`
	Prev    Hash     `json:"prev"`
	Signals *Signals `json:"signals,omitempty"`
	Answer  *Answer  `json:"answer,omitempty"`
	Hash    Hash     `json:"hash"`
}

// MarshalJSON encodes the record in its export form.
func (r Record) MarshalJSON() ([]byte, error) {
	return json.Marshal(recordJSON{
		Poll: r.Poll, Replica: r.Replica, Seq: r.Seq,
		HLC:   hlc.Timestamp{Wall: r.Wall, Logical: r.Logical}.String(),
		Voter: r.Voter, Option: r.Option, Idem: r.Idem,
		Trust: r.Trust, Counted: r.Counted, Late: r.Late, IPHash: r.IPHash,
		Prev: r.Prev, Signals: r.Signals, Answer: r.Answer, Hash: r.Hash(),
	})
}

// DecodeRecordJSON decodes one export line strictly: unknown fields,
// trailing data, invalid fields and a hash that does not match the record
// are errors.
func DecodeRecordJSON(line []byte) (Record, error) {
	// The API's strictness (the JSON v2 prototype): duplicate names, names
	// in another case, unknown members, invalid UTF-8 and trailing data
	// are all refused, so no two readers can see one line differently.
	var j recordJSON
	if err := jsonv2.Unmarshal(line, &j, jsonv2.RejectUnknownMembers(true), jsonv2.MatchCaseInsensitiveNames(false)); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	ts, err := hlc.Parse(j.HLC)
	if err != nil || ts.Replica != "" {
		return Record{}, fmt.Errorf("%w: hlc %q", ErrMalformed, j.HLC)
	}
	r := Record{
		Poll: j.Poll, Replica: j.Replica, Seq: j.Seq, Wall: ts.Wall, Logical: ts.Logical,
		Voter: j.Voter, Option: j.Option, Idem: j.Idem, Trust: j.Trust,
		Counted: j.Counted, Late: j.Late, IPHash: j.IPHash, Prev: j.Prev, Signals: j.Signals, Answer: j.Answer,
	}
	if err := r.Validate(); err != nil {
		return Record{}, err
	}
	if r.Hash() != j.Hash {
		return Record{}, fmt.Errorf("%w: hash does not match the record", ErrChain)
	}
	return r, nil
}

// Export writes one poll's records as NDJSON, streamed in (replica, seq)
// order, and returns how many it wrote.
func (l *Ledger) Export(w io.Writer, poll string) (int, error) {
	return WriteNDJSON(w, l.Scan(poll))
}

// WriteNDJSON writes records as NDJSON, one per line.
func WriteNDJSON(w io.Writer, records iter.Seq2[Record, error]) (int, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	n := 0
	for r, err := range records {
		if err != nil {
			return n, err
		}
		b, err := r.MarshalJSON()
		if err != nil {
			return n, err
		}
		bw.Write(b)
		if err := bw.WriteByte('\n'); err != nil {
			return n, fmt.Errorf("ledger: cannot write export: %w", err)
		}
		n++
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("ledger: cannot write export: %w", err)
	}
	return n, nil
}

// ReadNDJSON yields the records of an export, checking each line (see
// DecodeRecordJSON), that every record belongs to one poll, and that each
// replica's records form its chain in the order Export writes them (from
// seq 1, each linking to the one before): a repeated, missing or swapped
// line is an error here, whichever tool reads the file. Blank lines are
// skipped; a line over MaxLineBytes is an error. Errors name the line.
func ReadNDJSON(r io.Reader) iter.Seq2[Record, error] {
	return ReadNDJSONHeads(r, nil)
}

// ReadNDJSONHeads is ReadNDJSON that also checks the export's signed heads
// (a replica's signature over its chain's last record, written by
// ExportSigned) and passes each to onHead (nil: checked only). A record of
// a replica after its signed head is an error: the signature would not
// cover it.
func ReadNDJSONHeads(r io.Reader, onHead func(*SignedHead)) iter.Seq2[Record, error] {
	return ReadExport(r, ExportHooks{Head: onHead})
}

// ExportHooks receive an export's lines that are not records.
type ExportHooks struct {
	Head  func(*SignedHead) // each signed head, once checked
	Close func(PollClose)   // the close line, when the export has one
}

// ReadExport is ReadNDJSONHeads that also reads the export's close line
// (PollClose): at most one, naming the export's poll.
func ReadExport(r io.Reader, hooks ExportHooks) iter.Seq2[Record, error] {
	onHead := hooks.Head
	return func(yield func(Record, error) bool) {
		closed := false
		signed := map[chainID]bool{}
		br := bufio.NewReaderSize(r, 64<<10)
		var poll string
		var in interner
		chains := NewVerifier()
		for n := 1; ; n++ {
			line, err := readLine(br)
			if errors.Is(err, io.EOF) && len(line) == 0 {
				return
			}
			if err != nil && !errors.Is(err, io.EOF) {
				yield(Record{}, fmt.Errorf("line %d: %w", n, err))
				return
			}
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if bytes.HasPrefix(line, pollClosePrefix) {
				c, err := decodeClose(line)
				switch {
				case err != nil:
				case closed:
					err = fmt.Errorf("%w: a second close line", ErrMalformed)
				case poll != "" && c.Poll != poll:
					err = fmt.Errorf("%w: close line of poll %q in an export of poll %q", ErrInvalid, c.Poll, poll)
				}
				if err != nil {
					yield(Record{}, fmt.Errorf("line %d: %w", n, err))
					return
				}
				closed, poll = true, c.Poll
				if hooks.Close != nil {
					hooks.Close(c)
				}
				continue
			}
			if bytes.HasPrefix(line, signedHeadPrefix) {
				h, err := decodeSignedHead(line, chains)
				if err != nil {
					yield(Record{}, fmt.Errorf("line %d: %w", n, err))
					return
				}
				signed[chainID{poll: h.Poll, replica: h.Replica}] = true
				if onHead != nil {
					onHead(h)
				}
				continue
			}
			rec, err := DecodeRecordJSON(line)
			if err == nil && signed[chainID{poll: rec.Poll, replica: rec.Replica}] {
				err = fmt.Errorf("%w: a record of %s/%s after its signed head", ErrChain, rec.Poll, rec.Replica)
			}
			if err == nil && poll != "" && rec.Poll != poll {
				err = fmt.Errorf("%w: record of poll %q in an export of poll %q", ErrInvalid, rec.Poll, poll)
			}
			if err == nil {
				err = chains.Add(&rec)
			}
			if err != nil {
				yield(Record{}, fmt.Errorf("line %d: %w", n, err))
				return
			}
			poll = rec.Poll
			rec.Poll, rec.Replica = in.get(rec.Poll), in.get(rec.Replica)
			if !yield(rec, nil) {
				return
			}
		}
	}
}

// readLine returns the next line without its newline, refusing lines over
// MaxLineBytes without buffering them.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxLineBytes+1 {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrMalformed, MaxLineBytes)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte{'\n'}), err
	}
}
