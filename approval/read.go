package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
)

// Status serves GET /agent/status/{id}. An agent sees only its own
// requests: another agent's id is a 404 exactly like an unknown one, so
// the existence of other agents' requests does not leak.
func (s *Service) Status() http.Handler { return endpoint(s.status) }

func (s *Service) status(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	ex := scope.Get(r.Context())
	id := r.PathValue("id")
	rec, err := s.store.Get(r.Context(), id)
	if errors.Is(err, ErrNotFound) || (err == nil && rec.AgentID != ex.Agent.ID) {
		return notFound(id)
	}
	if err != nil {
		return fmt.Errorf("load request %s: %w", id, err)
	}
	return writeJSON(w, http.StatusOK, statusOf(rec, start))
}

func statusOf(rec *Record, start time.Time) *StatusResponse {
	return &StatusResponse{RequestID: rec.ID, ProcessingTimeMS: time.Since(start).Milliseconds(), State: rec.State,
		History: rec.History, Response: rec.Response, Escalation: rec.Escalation}
}

// ContextResponse is the answer of POST /agent/context.
type ContextResponse struct {
	RequestID        string         `json:"request_id"`
	ProcessingTimeMS int64          `json:"processing_time_ms"`
	Query            string         `json:"query"`
	Context          map[string]any `json:"context"`
	RelevantNodes    []NodeSummary  `json:"relevant_nodes"`
}

// maxContextLimit bounds how many specifications one query returns.
const maxContextLimit = 50

// Context serves POST /agent/context: the catalogue search of a QUERY,
// with a ContextQuery body. It is a QUERY in every other respect (recorded,
// decided by the policy, audited), so reading the catalogue obeys the same
// rules whichever door an agent uses; a refusal is a 403 with the reasons.
func (s *Service) Context() http.Handler { return endpoint(s.context) }

func (s *Service) context(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	ex := scope.Get(r.Context())
	body, err := readBody(w, r, bodyOverhead)
	if err != nil {
		return err
	}
	var q ContextQuery
	if err := decodeStrict(body, &q); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(q.Query) == "":
		return apierror.BadRequest("query", "query is required.")
	case q.Limit < 0 || q.Limit > maxContextLimit:
		return apierror.BadRequest("limit", "limit must be between 1 and %d.", maxContextLimit)
	case q.Limit == 0:
		q.Limit = defaultQueryLimit
	}
	req := &AgentRequest{AgentID: ex.Agent.ID, SessionID: q.SessionID, RequestType: TypeQuery, Action: ActionRead, Content: q.Query}
	id := newID()
	if err := s.auditReceipt(r, ex, id, body, req, nil); err != nil {
		return err
	}
	_, resp, err := s.process(r.Context(), ex, id, req, start, r.URL.Path, q.Limit)
	if err != nil {
		return err
	}
	if resp.State != StateCompleted {
		var reasons []string
		for _, v := range resp.Violations {
			reasons = append(reasons, v.Rule+": "+v.Description)
		}
		return apierror.Forbidden(strings.TrimSpace(resp.Feedback + " " + strings.Join(reasons, "; ")))
	}
	return writeJSON(w, http.StatusOK, &ContextResponse{RequestID: id, ProcessingTimeMS: time.Since(start).Milliseconds(),
		Query: q.Query, Context: resp.Context, RelevantNodes: resp.RelevantNodes})
}

// Capabilities is the answer of GET /agent/capabilities: the agent's
// registry entry (never its token hash) and what the approval API accepts.
type Capabilities struct {
	RequestID        string   `json:"request_id"`
	ProcessingTimeMS int64    `json:"processing_time_ms"`
	AgentID          string   `json:"agent_id"`
	AgentType        string   `json:"agent_type"`
	Capabilities     []string `json:"capabilities"`
	AllowedTargets   []string `json:"allowed_targets"`
	RateLimit        string   `json:"rate_limit"`
	TokenLimit       string   `json:"token_limit"`
	MaxRequestSize   int64    `json:"max_request_size"`
	ResponseFormat   string   `json:"response_format"`
	Models           []string `json:"models"`
	// ApprovalRateLimit is the limit of POST /agent/request.
	ApprovalRateLimit string   `json:"approval_rate_limit"`
	RequestTypes      []string `json:"request_types"`
	Actions           []string `json:"actions"`
	TargetTypes       []string `json:"target_types"`
	MaxContentSize    int64    `json:"max_content_size"`
	MaxReferences     int      `json:"max_references"`
	MaxDeviations     int      `json:"max_deviations"`
	KnownReferences   int      `json:"known_references"`
	// Compact SACP's registry fields and the agent's message rules
	// (docs/agent-messaging.md, Configuration); the endpoint is not shown,
	// agents reach each other through the gateway.
	roster.Profile
	ReceivesMessages bool                 `json:"receives_messages"`
	MayMessage       []roster.MessageRule `json:"may_message"`
}

// Capabilities serves GET /agent/capabilities.
func (s *Service) Capabilities() http.Handler { return endpoint(s.capabilities) }

func (s *Service) capabilities(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	ex := scope.Get(r.Context())
	a := ex.Agent
	lim := s.cur().cfg.Protocol.Limits
	return writeJSON(w, http.StatusOK, &Capabilities{
		RequestID: ex.RequestID, AgentID: a.ID, AgentType: a.Type,
		Capabilities: nonNil(a.Capabilities), AllowedTargets: nonNil(a.AllowedTargets),
		RateLimit: a.RateLimit.String(), TokenLimit: a.TokenLimit.String(), MaxRequestSize: int64(a.MaxRequestSize),
		ResponseFormat: responseFormat(a), Models: nonNil(a.Models),
		ApprovalRateLimit: strconv.Itoa(s.cur().rate.N) + "/" + confkit.PeriodName(s.cur().rate.Period),
		RequestTypes:      requestTypes, Actions: actions, TargetTypes: targetTypes,
		MaxContentSize: int64(lim.MaxContentSize), MaxReferences: lim.MaxReferences, MaxDeviations: lim.MaxDeviations,
		KnownReferences: s.cur().cat.Len(),
		Profile:         a.Profile.Shown(), ReceivesMessages: a.Endpoint != "", MayMessage: nonNil(a.Messages),
		ProcessingTimeMS: time.Since(start).Milliseconds(),
	})
}

// responseFormat is the agent's effective response_format
// (use_standard_protocol is its synonym for json_standard).
func responseFormat(a *roster.Agent) string {
	switch {
	case a.ResponseFormat != "":
		return a.ResponseFormat
	case a.StandardProtocol():
		return "json_standard"
	}
	return "none"
}

// writeJSON sends v. HTML is not escaped: content and paths appear as the
// agent wrote them.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	return nil
}
