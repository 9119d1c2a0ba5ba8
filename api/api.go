package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// Error codes of the v1 API. Every 4xx answer carries one.
const (
	CodeInvalidRequest  = "invalid_request"
	CodeUnauthorized    = "unauthorized"
	CodePollNotFound    = "poll_not_found"
	CodeQuizNotFound    = "quiz_not_found"
	CodeNotFound        = "not_found" // no such endpoint
	CodePollNotOpen     = "poll_not_open"
	CodePollClosed      = "poll_closed"
	CodeTooLarge        = "too_large"
	CodeInvalidOption   = "invalid_option"
	CodeRateLimited     = "rate_limited"
	CodeInternal        = "internal"
	CodeUnavailable     = "unavailable"
	CodeEdgeNode        = "edge_node"
	CodeRecordsLost     = "records_lost"
	CodePollNotClosed   = "poll_not_closed"
	CodeSessionRequired = "session_required"
	CodeSessionInvalid  = "session_invalid"
	CodeSessionExpired  = "session_expired"
	CodeSessionMismatch = "session_mismatch"
	CodePuzzleFailed    = "puzzle_failed"
	CodeUpgradeRequired = "upgrade_required"
	CodeTooManyPolls    = "too_many_polls"
	CodeResultHidden    = "result_hidden"
	CodeAlreadyAnswered = "already_answered"
	CodeTooLate         = "too_late"
	CodeQuizEnded       = "quiz_ended"
	CodeJoinNotFound    = "join_code_not_found"
	// CodeIdemConflict is a vote result's error: its idempotency key holds
	// another voter's vote; the vote was not taken (send it with a new key).
	CodeIdemConflict = "idem_conflict"
	// CodeOutcomeUnknown (504) is an edge's answer when a full node took
	// the vote's batch but did not answer before the edge's deadline, and
	// a full node's when it ledgered the vote but its copy on a second
	// machine was not confirmed: the vote may be counted. Send the same
	// request again, with the same key, for the definitive answer. Every
	// other refusal changed nothing.
	CodeOutcomeUnknown = "outcome_unknown"
	// CodeNoCopy (503): no second full node is reachable to hold a copy
	// of a new vote (--ack-copies 2), so it was not taken.
	CodeNoCopy = "no_copy"
	// CodeStampAhead (400): a vote's "after" stamp is further ahead of the
	// node's clock than the clocks of a cluster may differ; nothing taken.
	CodeStampAhead = "stamp_ahead"
	// CodeNotCertified (409): a proof asked of a poll with no certified
	// result yet (open, in its grace window, or pending), or certified
	// by a release whose certificates had no tree.
	CodeNotCertified = "not_certified"
	// CodeLeafNotFound (404): no record of the certified result has the
	// leaf (the record hash) a proof was asked for.
	CodeLeafNotFound = "leaf_not_found"
)

// Error is an API error: an HTTP status, a machine-readable code and a
// message for people. RetryAfter, when set, becomes a Retry-After header.
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorBody is the JSON of every error answer.
type ErrorBody struct {
	Error ErrorInfo `json:"error"`
}

// ErrorInfo is an error's code and message.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WriteError answers r with err: its own status and code when it is (or
// wraps) an *Error, otherwise 500 internal, logged to r's logger
// (WithLogger).
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		Logger(r.Context()).Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		e = Errorf(http.StatusInternalServerError, CodeInternal, "internal error")
	}
	if e.RetryAfter > 0 {
		secs := int((e.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	var body ErrorBody
	body.Error.Code, body.Error.Message = e.Code, e.Message
	WriteJSON(w, r, e.Status, body)
}

// WriteJSON answers r with v as JSON; a v that cannot be encoded is a
// 500, logged to r's logger.
func WriteJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		Logger(r.Context()).Error("cannot encode response", "method", r.Method, "path", r.URL.Path, "err", err)
		http.Error(w, `{"error":{"code":"internal","message":"cannot encode response"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// DecodeJSON reads a request body of at most max bytes into v, strictly:
// the content type must be JSON, the body valid UTF-8 holding exactly one
// JSON value with no unknown fields. Failures are *Error values (400, 413,
// 415) ready for WriteError.
func DecodeJSON(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	body, err := ReadBody(w, r, max)
	if err != nil {
		return err
	}
	return Unmarshal(body, v)
}

// ReadBody reads a JSON request body of at most max bytes, checking the
// content type (415: RequireJSON) and the size (413).
func ReadBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if err := RequireJSON(r); err != nil {
		return nil, err
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, max), r.ContentLength, max)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, Errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "body larger than %d bytes", max)
		}
		return nil, Errorf(http.StatusBadRequest, CodeInvalidRequest, "cannot read body: %v", err)
	}
	return body, nil
}

// readAll reads the body; when its length is declared (and allowed) it
// reads into a buffer of exactly that size instead of growing one from
// 512 bytes (a vote is about 100).
func readAll(r io.Reader, declared, max int64) ([]byte, error) {
	if declared <= 0 || declared > max {
		return io.ReadAll(r)
	}
	b := make([]byte, declared)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("body shorter than its Content-Length: %w", err)
		}
		return nil, err
	}
	return b, nil
}

// Unmarshal decodes one strict JSON value (see DecodeJSON) from b. It uses
// the JSON v2 prototype (github.com/go-json-experiment/json): it rejects
// unknown members, duplicate names, invalid UTF-8 and trailing data by
// itself, and decodes a vote about three times faster than encoding/json's
// Decoder with the same checks.
func Unmarshal(b []byte, v any) error {
	if err := jsonv2.Unmarshal(b, v, jsonv2.RejectUnknownMembers(true), jsonv2.MatchCaseInsensitiveNames(false)); err != nil {
		return Errorf(http.StatusBadRequest, CodeInvalidRequest, "malformed JSON: %v", err)
	}
	return nil
}

// RequireBearer wraps h so it answers 401 unless the request carries
// "Authorization: Bearer <token>" for one of tokens (several during a
// rotation; empty ones never match). Comparisons take constant time.
func RequireBearer(tokens []string, h http.Handler) http.Handler {
	check := bearerCheck(tokens)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !check(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tally"`)
			WriteError(w, r, Errorf(http.StatusUnauthorized, CodeUnauthorized, "admin token required"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// OptionalBearer serves public endpoints that show more to the host: a
// request with a valid admin token reaches h marked as the admin's (see
// IsAdmin), one without a token as anyone's, and one with a wrong token is
// refused rather than silently served the public view.
func OptionalBearer(tokens []string, h http.Handler) http.Handler {
	check := bearerCheck(tokens)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			h.ServeHTTP(w, r)
			return
		}
		if !check(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tally"`)
			WriteError(w, r, Errorf(http.StatusUnauthorized, CodeUnauthorized, "the admin token is wrong (send none for the public view)"))
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), adminKey{}, true)))
	})
}

type adminKey struct{}

// IsAdmin reports whether OptionalBearer found the admin token on r.
func IsAdmin(r *http.Request) bool { ok, _ := r.Context().Value(adminKey{}).(bool); return ok }

// bearerCheck compares a request's Authorization header with every token
// in constant time.
func bearerCheck(tokens []string) func(*http.Request) bool {
	var wants [][]byte
	for _, t := range tokens {
		if t != "" {
			wants = append(wants, []byte("Bearer "+t))
		}
	}
	return func(r *http.Request) bool {
		// The scheme's case is free and one or more spaces follow it (RFC
		// 9110 section 11.1, 11.4); the token's case is not.
		got := []byte(r.Header.Get("Authorization"))
		if scheme, token, found := strings.Cut(string(got), " "); found && strings.EqualFold(scheme, "Bearer") {
			got = []byte("Bearer " + strings.TrimLeft(token, " "))
		}
		ok := 0
		for _, want := range wants {
			ok |= subtle.ConstantTimeCompare(got, want)
		}
		return ok == 1
	}
}

type loggerKey struct{}

// WithLogger returns next with every request carrying logger, which
// WriteError and WriteJSON log to: a server's handlers log through the
// logger its owner injected.
func WithLogger(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), loggerKey{}, logger)))
	})
}

// Logger returns the logger WithLogger put in ctx; slog.Default() for a
// request served without one (a handler tested on its own).
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}
