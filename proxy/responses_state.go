package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sacpgw/gateway/dialect/responses"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/scope"
)

// Continuing a Responses API response (previous_response_id) with state the
// gateway holds. When a response is final and its request did not say
// store: false, the gateway keeps the conversation so far in the neutral
// form (the one it continued, this request's input, the answer as the
// client received it, redacted) under (agent, response id), for
// responses.store_ttl; a request naming it gets the request's
// instructions, that conversation, then its input, and every chat stage
// governs the whole (limits, Rego, the protocol, redaction, audit).
//
// Failing closed: a response id of another agent, unknown, expired or
// evicted is a 404; a state backend that cannot be read is a 503 (the
// request is not served without the conversation it names). Keeping
// happens before the client receives the final response (the JSON body,
// or a stream's last event), so that a client continuing at once finds it;
// if keeping fails the answer is served all the same (the model has
// answered and the tokens are spent), its store member says false, and
// the failure is logged and counted (ResponseState): continuing it is
// then a 404.

// ResponseState is the Responses API's server-side state: where the
// conversations are kept, and the counts of those that could not be. One
// per process, shared by the gateways that configuration reloads build.
type ResponseState struct {
	store    ResponseStore
	tooLarge atomic.Int64
	failures atomic.Int64
}

// NewResponseState keeps conversations in store.
func NewResponseState(store ResponseStore) *ResponseState {
	return &ResponseState{store: store}
}

// TooLarge counts the conversations not kept for being over
// responses.max_stored_size.
func (s *ResponseState) TooLarge() int64 { return s.tooLarge.Load() }

// StoreFailures counts the conversations not kept because the state
// backend failed.
func (s *ResponseState) StoreFailures() int64 { return s.failures.Load() }

// tooLargeMarker is kept instead of a conversation over the size limit, so
// that continuing it says why it is not there. It is not JSON: no kept
// conversation can be mistaken for it, nor it for one.
var tooLargeMarker = []byte("too_large")

// responsesKeeper is the Responses dialect of one Gateway: the state and
// the configuration it keeps conversations with.
type responsesKeeper struct {
	state   *ResponseState
	ttl     time.Duration
	maxSize int
	log     *slog.Logger
}

// newResponsesDialect is the Responses API dialect keeping conversations in
// state (nil: a memory store of its own, for a Gateway built without one).
func newResponsesDialect(state *ResponseState, cfg *config.Config, log *slog.Logger) *dialect {
	if state == nil {
		state = NewResponseState(NewMemoryResponseStore(MemoryResponseStoreOptions{}))
	}
	k := &responsesKeeper{state: state, ttl: cfg.Gateway.Responses.StoreTTL.D(), maxSize: int(cfg.Gateway.Responses.MaxStoredSize), log: log}
	d := *responsesDialect
	d.session = func() dialectSession { return &responsesSession{k: k} }
	return &d
}

// responseIDLen is the length of the ids the gateway gives responses:
// "resp_" and 32 hex digits (128 random bits).
const responseIDLen = len("resp_") + 32

// newResponseSuffix is a response id's random part: ids name kept
// conversations, so they must not repeat, nor be guessed, whatever ids
// the provider gives its completions.
func newResponseSuffix() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// validResponseID reports whether id has the form of the ids the gateway
// gives; only those are looked up (which also keeps any other string out
// of the store's keys).
func validResponseID(id string) bool {
	if len(id) != responseIDLen || id[:5] != "resp_" {
		return false
	}
	for _, c := range []byte(id[5:]) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// responsesSession is one Responses exchange.
type responsesSession struct {
	k *responsesKeeper
	// Set by request; nil turn: the request was never translated.
	ex     *scope.Exchange
	ctx    context.Context // the request's, not cancelled with it
	turn   *responses.Turn
	prev   *responses.History
	suffix string
}

func (s *responsesSession) request(r *http.Request, raw []byte) ([]byte, error) {
	turn, err := responses.ReadTurn(raw)
	if err != nil {
		return nil, apierror.BadRequest("", "%s", err.Error())
	}
	s.ex, s.ctx, s.turn, s.suffix = scope.Get(r.Context()), context.WithoutCancel(r.Context()), turn, newResponseSuffix()
	// A refusal below is on the trail with the model and stream asked for
	// (the chat stages set them again from the translated body).
	s.ex.Model, s.ex.Stream = turn.Model, turn.Stream
	// From here the exchange's entries say what it continues and whether
	// it is kept, its refusals included (a 404 below is on the trail with
	// the id it named): stamp and journal.respond.
	s.ex.Responses = &scope.ResponsesTurn{PreviousResponseID: turn.PreviousResponseID, Store: turn.Store}
	if id := turn.PreviousResponseID; id != "" {
		if s.prev, err = s.k.load(r.Context(), s.ex.Agent.ID, id); err != nil {
			return nil, err
		}
	}
	chat, _, _, err := turn.Chat(s.prev)
	return chat, err
}

func (s *responsesSession) response(chat []byte) ([]byte, error) {
	return responses.ResponseWith(chat, s.meta())
}

func (s *responsesSession) stream(w io.Writer, model string) io.WriteCloser {
	return responses.NewStreamWith(w, model, s.meta())
}

// meta is what the exchange's response says of itself, and how it is kept.
func (s *responsesSession) meta() responses.Meta {
	if s.turn == nil {
		return responses.Meta{}
	}
	m := responses.Meta{Suffix: s.suffix, PreviousResponseID: s.turn.PreviousResponseID, Store: s.turn.Store}
	if s.turn.Store {
		m.Keep = s.keep
	}
	return m
}

// keep keeps the conversation after the answer a; false when it could not
// (logged and counted: the client has its answer, which says store:
// false).
func (s *responsesSession) keep(a *responses.Answer) bool {
	agent := s.ex.Agent.ID
	conv := s.turn.Next(s.prev, a)
	tooLarge := len(conv) > s.k.maxSize
	if tooLarge {
		// Not truncated, never: a shortened conversation would be a
		// different one. The marker makes continuing it a 404 that says
		// why.
		conv = tooLargeMarker
	}
	// The client may have left: what it was answered is kept all the
	// same, within the store's own deadline.
	err := s.k.state.store.Put(s.ctx, agent, a.ID, conv, s.k.ttl)
	switch {
	case err != nil:
		s.k.state.failures.Add(1)
		s.k.log.Error("responses: conversation not kept: the state backend failed", "request_id", s.ex.RequestID, "agent", agent,
			"response_id", a.ID, "too_large", tooLarge, "error", err.Error())
		return false
	case tooLarge:
		s.k.state.tooLarge.Add(1)
		s.k.log.Warn("responses: conversation not kept: over responses.max_stored_size", "request_id", s.ex.RequestID, "agent", agent,
			"response_id", a.ID, "max_stored_size", s.k.maxSize)
		return false
	}
	return true
}

// load is the conversation kept for (agent, id).
func (k *responsesKeeper) load(ctx context.Context, agent, id string) (*responses.History, error) {
	if !validResponseID(id) {
		return nil, previousNotFound(id, "")
	}
	b, err := k.state.store.Get(ctx, agent, id)
	switch {
	case errors.Is(err, ErrResponseNotFound):
		return nil, previousNotFound(id, "")
	case err != nil:
		// Fail closed: without the conversation the request would be
		// another one.
		return nil, apierror.StateUnavailable(err)
	case bytes.Equal(b, tooLargeMarker):
		return nil, previousNotFound(id, fmt.Sprintf(" It was not kept: its conversation was over the %d bytes this gateway keeps (responses.max_stored_size). Send the conversation in input instead.", k.maxSize))
	}
	h, err := responses.DecodeHistory(b)
	if err != nil {
		return nil, fmt.Errorf("responses: the conversation kept for %s cannot be read: %w", id, err)
	}
	return h, nil
}

// previousNotFound is OpenAI's answer for a response it does not have,
// with why when the gateway knows. The id is the client's own, clipped.
func previousNotFound(id, why string) *apierror.Error {
	return &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "previous_response_not_found",
		Param: "previous_response_id", Message: fmt.Sprintf("Previous response with id '%s' not found.%s", clipID(id), why)}
}

func clipID(id string) string {
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}

var _ dialectSession = (*responsesSession)(nil)
