package certify

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"tally/api"
	"tally/ids"
	"tally/state"
)

// ViewOf describes the poll's certification as this node knows it.
func (c *Certifier) ViewOf(poll string) (api.ResultView, error) {
	def, ok := c.cfg.State.Defs.Poll(poll)
	if !ok {
		return api.ResultView{}, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", poll)
	}
	v := api.ResultView{Poll: poll, Status: state.Pending}
	cert, ok := c.cfg.State.Defs.Certificate(poll)
	if !ok {
		v.Coordinator = c.coordinator(poll)
		now := c.cfg.Now().UnixMilli()
		switch {
		case def.Parked():
			v.Reason = "the quiz question has not started"
		case def.ClosesAt == 0 || now < def.ClosesAt:
			v.Reason = "the poll is not closed"
		case now < def.GraceEnd():
			v.Reason = fmt.Sprintf("in the grace window until %s", time.UnixMilli(def.GraceEnd()).UTC().Format(time.RFC3339))
		default:
			v.Reason = "waiting for the coordinator's first attempt"
		}
		return v, nil
	}
	var d api.ResultDetail
	if len(cert.Detail) > 0 {
		if err := json.Unmarshal(cert.Detail, &d); err == nil {
			v.Detail = &d
			v.Coordinator = d.Coordinator
		}
	}
	v.Status, v.Reason, v.CertifiedBy, v.DecidedAt = cert.Status, cert.Reason, cert.By, cert.TS.Wall
	v.Totals, v.Total, v.Digest = cert.Totals, cert.Total, cert.Digest
	v.Certificate = &cert
	if key, ok := c.cfg.State.Defs.PublicKey(cert.By); ok {
		v.CertifierKey = key
	}
	return v, nil
}

// coordinator names the node first in the poll's order, if it is a member
// (and not gone by its refusals: gone.go).
func (c *Certifier) coordinator(poll string) string {
	byReplica := map[string]string{}
	var replicas []string
	for _, p := range c.members.live() {
		if p.Full {
			byReplica[p.Replica] = p.Name
			replicas = append(replicas, p.Replica)
		}
	}
	if order := Order(poll, replicas); len(order) > 0 {
		return byReplica[order[0]]
	}
	return ""
}

// HandleResult serves GET /v1/polls/{poll}/result.
func (c *Certifier) HandleResult(w http.ResponseWriter, r *http.Request) {
	def, ok := c.cfg.State.Defs.Poll(r.PathValue("poll"))
	if ok && def.Withheld(c.cfg.Now().UnixMilli()) && !api.IsAdmin(r) { // a quiz question before it opens is the host's
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", def.ID))
		return
	}
	if ok && def.Hidden && !api.IsAdmin(r) {
		api.WriteError(w, r, api.Errorf(http.StatusForbidden, api.CodeResultHidden, "the host has not revealed poll %q's result yet", def.ID))
		return
	}
	v, err := c.ViewOf(r.PathValue("poll"))
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	if def, ok := c.cfg.State.Defs.Poll(v.Poll); ok && def.Quiz != nil && !api.IsAdmin(r) {
		c.pseudonymize(&v)
	}
	api.WriteJSON(w, r, http.StatusOK, v)
}

// pseudonymize keeps a quiz question's participants' voter ids (which
// may be what lets one answer) out of a public result: its answers name
// them as the leaderboard does, and the signed certificate, which holds
// the ids, is left out. The admin sees both; an auditor checks the
// signature with the admin's exports (docs/quiz.md).
func (c *Certifier) pseudonymize(v *api.ResultView) {
	v.Certificate, v.CertifierKey = nil, nil
	if v.Detail == nil || v.Detail.Result == nil {
		return
	}
	d, res := *v.Detail, *v.Detail.Result
	res.Answers = slices.Clone(res.Answers)
	for i := range res.Answers {
		res.Answers[i].Voter = c.pseudonym(res.Answers[i].Voter)
	}
	d.Result = &res
	v.Detail = &d
}

// HandleCertify serves POST /v1/polls/{poll}/certify (admin): certify now,
// at this node, optionally without the replicas named in "exclude", or
// with only the records the replicas named in "accept_lost" still hold
// (then "reason" is required and recorded in the certificate).
func (c *Certifier) HandleCertify(w http.ResponseWriter, r *http.Request) {
	poll := r.PathValue("poll")
	var req api.CertifyRequest
	if r.ContentLength != 0 {
		if err := api.DecodeJSON(w, r, 16<<10, &req); err != nil {
			api.WriteError(w, r, err)
			return
		}
	}
	var d Decisions
	for _, list := range []struct {
		name string
		in   []string
		out  *[]api.Exclusion
	}{{"exclude", req.Exclude, &d.Exclude}, {"accept_lost", req.AcceptLost, &d.AcceptLost}} {
		for _, rep := range list.in {
			if err := ids.Valid(rep); err != nil {
				api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "%s: replica id %v", list.name, err))
				return
			}
			if slices.ContainsFunc(*list.out, func(e api.Exclusion) bool { return e.Replica == rep }) {
				continue
			}
			*list.out = append(*list.out, api.Exclusion{Replica: rep, Reason: req.Reason})
		}
	}
	for _, e := range d.AcceptLost {
		if slices.ContainsFunc(d.Exclude, func(x api.Exclusion) bool { return x.Replica == e.Replica }) {
			api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "replica %s is both in exclude and in accept_lost: name it in one", e.Replica))
			return
		}
	}
	if len(d.Exclude)+len(d.AcceptLost) > 0 {
		if strings.TrimSpace(req.Reason) == "" {
			api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "reason: required with exclude and accept_lost, and not blank: it is recorded in the certificate for good"))
			return
		}
		if err := ids.Text(req.Reason, 500); err != nil {
			api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "reason: %v (required with exclude and accept_lost)", err))
			return
		}
	}
	if _, ok := c.cfg.State.Defs.Poll(poll); !ok {
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", poll))
		return
	}
	if held, ok := c.cfg.State.Defs.Certificate(poll); ok && held.Status == state.Reconciled {
		if len(d.Exclude)+len(d.AcceptLost) > 0 {
			api.WriteError(w, r, api.Errorf(http.StatusConflict, api.CodeInvalidRequest, "poll %q is certified already (by %s): a certificate is final, so the exclude and accept_lost given were not applied", poll, held.By))
			return
		}
		c.HandleResult(w, r) // final already: answer with it
		return
	}
	_, err := c.Certify(r.Context(), poll, d)
	switch {
	case errors.Is(err, ErrNotClosed):
		api.WriteError(w, r, api.Errorf(http.StatusConflict, api.CodePollNotClosed, "%v", err))
		return
	case errors.Is(err, ErrDecision):
		api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "%v", err))
		return
	case err != nil && !errors.Is(err, ErrIncomplete):
		api.WriteError(w, r, err)
		return
	}
	c.HandleResult(w, r)
}
