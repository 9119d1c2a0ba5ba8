package ingest

import (
	"errors"
	"net/http"
	"time"

	"tally/api"
	"tally/ledger"
)

// Request is one client's vote request as another node relayed it: its
// votes, decoded by the edge, or the body it sent; and what is known of
// the client.
type Request struct {
	// Votes are the request's votes as an edge decoded them
	// (api.DecodeVotes); they are checked again here (api.CheckVotes),
	// not decoded. Nil: Body is decoded.
	Votes  []Vote
	Body   []byte
	Sender api.Sender
}

// Reply is the answer to one Request: a VoteResponse, or an error for that
// request alone (an *api.Error, as HandleVotes would have written it).
type Reply struct {
	Response VoteResponse
	Err      error
}

// VoteBatch answers many clients' vote requests for one poll at once, as
// an edge relays them: each is decoded, checked and stamped on its own,
// and answered exactly as Vote would answer it, but the new votes of all
// of them go to the ledger in one append, so the batch costs one commit
// and one wait instead of one per request. A request refused on its own
// merits refuses only itself; a failed append refuses every request that
// had new votes.
func (p *Pipeline) VoteBatch(pollID string, reqs []Request) []Reply {
	start := time.Now()
	replies := make([]Reply, len(reqs))
	defer func() { // after the locks below are let go: the batch's receipts on every core
		results := make([][]Result, len(replies))
		for i := range replies {
			results[i] = replies[i].Response.Results
		}
		signReceipts(p.cfg.SignReceipt, results...)
	}()
	p.stamping.RLock()
	defer p.stamping.RUnlock()
	preps := make([]*prepared, len(reqs))
	sizes := make([]int, len(reqs)) // votes per request, for the metrics; 0: refused before the pipeline
	recs := make([]ledger.Record, 0, len(reqs))
	for i, q := range reqs {
		pr, n, err := p.prepareRequest(pollID, q)
		sizes[i] = n
		if err != nil {
			replies[i].Err = err
			continue
		}
		preps[i] = pr
		recs = append(recs, pr.recs...)
	}
	// The records, appended together, are the ones each request's answer
	// reads: the ledger numbers them in place.
	var appended []ledger.Appended
	var appendErr error
	if len(recs) > 0 {
		p.inflight.RLock()
		defer p.inflight.RUnlock()
		appended, appendErr = p.cfg.Ledger.Append(recs...)
	}
	// Ledgered but not copied: counted below, each request answered
	// outcome_unknown (notCopiedErr).
	var notCopied error
	if errors.Is(appendErr, ledger.ErrNotCopied) {
		notCopied, appendErr = notCopiedErr(appendErr), nil
	} else if appendErr != nil {
		appendErr = ledgerErr(appendErr)
	}
	off := 0
	now := p.cfg.Now().UnixMilli()
	for i, pr := range preps {
		if pr == nil {
			if sizes[i] > 0 {
				p.observe(start, sizes[i], nil, replies[i].Err)
			}
			continue
		}
		n := len(pr.recs)
		results, err := pr.results, error(nil)
		switch {
		case n > 0 && appendErr != nil:
			pr.tokens.giveBack()
			results, err = nil, appendErr
		case n > 0:
			results, err = p.countAppended(pollID, pr.results, pr.fresh, pr.look.Votes, recs[off:off+n], appended[off:off+n])
			if err == nil && notCopied != nil {
				results, err = nil, notCopied
			}
		}
		off += n
		pr.release()
		p.observe(start, sizes[i], results, err)
		replies[i] = Reply{Response: VoteResponse{Results: results, ServerTime: now}, Err: err}
	}
	return replies
}

// prepareRequest is one relayed request up to its append: its votes'
// checks (or the body's size and decoding), its token, and prepare. It
// returns how many votes the request carried, for the metrics, or 0 if it
// was refused before the pipeline (decode counts those refusals itself).
func (p *Pipeline) prepareRequest(pollID string, q Request) (*prepared, int, error) {
	var (
		votes  []Vote
		client Client
		def    pollRead
		err    error
	)
	if q.Votes != nil {
		if err := api.CheckVotes(q.Votes); err != nil {
			p.m.refused(err, 1)
			return nil, 0, err
		}
		votes, client, def, err = p.sender(pollID, q.Votes, q.Sender)
	} else {
		if int64(len(q.Body)) > p.cfg.Limits.MaxBody {
			return nil, 0, api.Errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "body larger than %d bytes", p.cfg.Limits.MaxBody)
		}
		votes, client, def, err = p.decode(pollID, q.Body, q.Sender)
	}
	if err != nil {
		return nil, 0, err
	}
	pr, err := p.prepare(pollID, def, votes, client)
	return pr, len(votes), err
}
