package approval

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/protocol"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
)

// Tokens of the test configuration.
const (
	tokClaude   = "tok-claude-3"
	tokCopilot  = "tok-copilot-2"
	tokGemini   = "tok-gemini-pro"
	tokAdmin    = "tok-admin"
	tokReviewer = "tok-security-lead"
	tokAlice    = "tok-alice"
)

func testAgent(id, typ string, caps, targets []string, token string, maxSize config.Size) *roster.Agent {
	return &roster.Agent{ID: id, Type: typ, Capabilities: caps, AllowedTargets: targets, MaxRequestSize: maxSize,
		RateLimit: config.Rate{N: 100, Period: time.Hour}, TokenSHA256: roster.HashTokenHex(token), TokenHash: roster.HashToken(token)}
}

// testConfig is the approval protocol's example registry and protocol
// settings.
func testConfig() *config.Config {
	return &config.Config{
		Gateway: config.Gateway{Admin: config.Admin{
			TokenSHA256: roster.HashTokenHex(tokAdmin),
			Reviewers: []config.Reviewer{
				{Name: "security-lead", TokenSHA256: roster.HashTokenHex(tokReviewer)},
				{Name: "alice", TokenSHA256: roster.HashTokenHex(tokAlice)},
			},
		}},
		Agents: map[string]*roster.Agent{
			"claude-3":   testAgent("claude-3", "code-generator", []string{"read", "write", "analyze"}, []string{"architecture", "design", "code"}, tokClaude, 50<<10),
			"copilot-2":  testAgent("copilot-2", "code-completer", []string{"read", "suggest"}, []string{"code"}, tokCopilot, 10<<10),
			"gemini-pro": testAgent("gemini-pro", "reviewer", []string{"read", "analyze", "validate"}, []string{"all"}, tokGemini, 1<<20),
		},
		Protocol: protocol.Config{
			Version:    "1.0",
			Timeouts:   protocol.Timeouts{Validation: config.Duration(5 * time.Second), Response: config.Duration(10 * time.Second), Escalation: config.Duration(24 * time.Hour)},
			Limits:     protocol.Limits{MaxContentSize: 100 << 10, MaxReferences: 20, MaxDeviations: 5, MaxRetryAttempts: 3},
			Compliance: protocol.Compliance{StrictMode: true, AllowDeviations: false, RequireRationale: true, EnforceReferences: true},
		},
	}
}

// testAuthorizer is the gateway's RBAC (docs/policy-authoring.md, RBAC and
// input.authz) in a few lines: read needs "read",
// create/modify/delete need "write", and the target type must be allowed.
func testAuthorizer(cfg *config.Config) Authorizer {
	return AuthorizerFunc(func(agentID, action, target string) Authz {
		a := cfg.Agents[agentID]
		if a == nil {
			return Authz{Reason: "unknown agent " + agentID}
		}
		capability := "write"
		if action == ActionRead || action == "query" {
			capability = "read"
		}
		if !slices.Contains(a.Capabilities, capability) {
			return Authz{Reason: fmt.Sprintf("%s lacks capability %s for %s", agentID, capability, action)}
		}
		if target != "" && !slices.Contains(a.AllowedTargets, "all") && !slices.Contains(a.AllowedTargets, target) {
			return Authz{Reason: fmt.Sprintf("target %s is not in %s's allowed_targets", target, agentID)}
		}
		return Authz{Allowed: true, Reason: "allowed"}
	})
}

// testDecider is a small deterministic stand-in for the Rego policy: the
// approval protocol's validation rules, and escalation of deletes of
// architecture and of high risk. It reads only the documented input, so it also
// checks the input's shape.
type testDecider struct {
	mu    sync.Mutex
	last  map[string]any
	calls int
	err   error
	// status, when set, overrides the verdict.
	status string
}

var requiredFields = map[string][]string{
	TypeApproval: {"content", "rationale", "target_type"},
	TypeQuery:    {"content"},
	TypeValidate: {"content", "target_type"},
	TypeReport:   {"request_id", "completed", "changes_made"},
}

func (d *testDecider) Approval(_ context.Context, in map[string]any) (policy.ApprovalDecision, error) {
	d.mu.Lock()
	d.last, d.calls = in, d.calls+1
	err, override, n := d.err, d.status, d.calls
	d.mu.Unlock()
	if err != nil {
		return policy.ApprovalDecision{}, err
	}
	req := in["request"].(map[string]any)
	proto := in["protocol"].(map[string]any)
	limits := proto["limits"].(map[string]any)
	compliance := proto["compliance"].(map[string]any)
	authz := in["authz"].(map[string]any)
	known := in["known_references"].([]any)
	dec := policy.ApprovalDecision{DecisionID: fmt.Sprintf("dec-%d", n), Revision: "test-revision", Confidence: 0.9}
	add := func(rule, desc, sugg string) {
		dec.Violations = append(dec.Violations, policy.Violation{Rule: rule, Description: desc, Suggestion: sugg})
		dec.Suggestions = append(dec.Suggestions, sugg)
	}
	typ := req["request_type"].(string)
	for _, f := range requiredFields[typ] {
		v := req[f]
		if v == nil || v == "" {
			add("required_fields", f+" is required for "+typ, "Add "+f+".")
		}
	}
	if !authz["allowed"].(bool) {
		add("authorization", authz["reason"].(string), "Ask for an allowed action and target.")
	}
	if int64(req["content_bytes"].(int)) > limits["max_content_size"].(int64) {
		add("content_size", "content exceeds max_content_size", "Split the change.")
	}
	refs := req["references"].([]any)
	if int64(len(refs)) > limits["max_references"].(int64) {
		add("references.count", "too many references", "Cite fewer specifications.")
	}
	if compliance["enforce_references"].(bool) {
		for _, r := range refs {
			if !slices.Contains(known, r) {
				add("references.unknown", fmt.Sprintf("reference %v is not a registered specification", r), "Query available specifications first.")
			}
		}
	}
	if devs := req["deviations"].([]any); len(devs) > 0 && !compliance["allow_deviations"].(bool) {
		add("deviations", "deviations are not allowed", "Follow the standards or ask for an exception.")
	}
	if compliance["require_rationale"].(bool) && typ == TypeApproval && req["rationale"] == "" {
		add("rationale", "a rationale is required", "Explain why the change is needed.")
	}
	switch {
	case override != "":
		dec.Status = override
	case len(dec.Violations) > 0:
		dec.Status = StatusRejected
		dec.Feedback = fmt.Sprintf("%d violation(s).", len(dec.Violations))
	case (req["action"] == ActionDelete && req["target_type"] == "architecture") || req["risk_assessment"] == "high":
		dec.Status = StatusEscalated
		dec.EscalationReason = "Risky change: deletes architecture or is assessed high risk."
		dec.Violations = append(dec.Violations, policy.Violation{Rule: "risk.escalate", Description: "risky change needs a human"})
	default:
		dec.Status = StatusApproved
		dec.Feedback = "Compliant."
		dec.Constraints = []string{"Keep references current."}
	}
	return dec, nil
}

func (d *testDecider) set(status string, err error) {
	d.mu.Lock()
	d.status, d.err = status, err
	d.mu.Unlock()
}

func (d *testDecider) lastInput() map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// harness is the service behind an httptest server, with the gateway's
// identify stage played by identify below.
type harness struct {
	t       testing.TB
	cfg     *config.Config
	svc     *Service
	store   *MemoryStore
	audit   *testkit.Trail
	decider *testDecider
	clock   *testkit.Clock
	srv     *httptest.Server
	// ops is the operator page's source (ops_test.go).
	ops *fakeOps
}

type option func(*Deps)

func newHarness(t testing.TB, opts ...option) *harness {
	t.Helper()
	cfg := testConfig()
	cat, err := LoadCatalogue("../config/specs")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, cfg: cfg, store: NewMemoryStore(), audit: &testkit.Trail{}, decider: &testDecider{},
		clock: testkit.NewClock(time.Date(2025, 11, 2, 9, 0, 0, 0, time.UTC)), ops: &fakeOps{}}
	d := Deps{Config: cfg, Decider: h.decider, Authorizer: testAuthorizer(cfg), Store: h.store, Limiter: limit.NewMemory(),
		Audit: &door.Recorder{Log: h.audit, FailClosed: true, Logger: slog.New(slog.DiscardHandler)}, Catalogue: cat, BaseURL: "https://gw.example.test", Now: h.clock.Now,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(&d)
	}
	h.svc, err = New(d)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewServer(mux(h.svc, cfg, h.ops))
	t.Cleanup(func() {
		h.srv.Close()
		h.svc.notifying.Wait()
	})
	return h
}

// mux mounts the routes the way the lead's shell does: agent routes behind
// identification, the others (and the review site's, with ops as the
// operator page's source) with only the request scope.
func mux(svc *Service, cfg *config.Config, ops OpsSource) http.Handler {
	m := http.NewServeMux()
	for _, rt := range append(svc.Routes(), svc.SiteRoutes(ops)...) {
		h := rt.Handler
		if rt.Access == door.Agent {
			h = identify(cfg, h)
		}
		m.Handle(rt.Pattern(), withScope(h))
	}
	return m
}

func withScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ex := &scope.Exchange{RequestID: "http-" + newID()[4:12], SessionID: r.Header.Get("X-Session-Id"), Start: time.Now()}
		next.ServeHTTP(w, scope.Attach(r, ex))
	})
}

// identify stands in for the gateway's identify stage.
func identify(cfg *config.Config, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		h := roster.HashToken(token)
		var found *roster.Agent
		for _, a := range cfg.Agents {
			if subtle.ConstantTimeCompare(h[:], a.TokenHash[:]) == 1 {
				found = a
			}
		}
		if found == nil {
			apierror.Write(w, apierror.Unauthorized("unknown token"))
			return
		}
		scope.Get(r.Context()).Agent = found
		next.ServeHTTP(w, r)
	})
}

type result struct {
	status int
	header http.Header
	body   []byte
}

func (r result) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// apiError decodes an OpenAI-shaped error.
func (r result) apiError(t testing.TB) (typ, code, param, msg string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    string  `json:"code"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	r.json(t, &e)
	if e.Error.Param != nil {
		param = *e.Error.Param
	}
	return e.Error.Type, e.Error.Code, param, e.Error.Message
}

func (h *harness) do(method, path, token string, body any) result {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return result{status: res.StatusCode, header: res.Header, body: b}
}

// submit posts an AgentRequest and decodes the LibrarianResponse.
func (h *harness) submit(token string, req map[string]any) (result, LibrarianResponse) {
	h.t.Helper()
	res := h.do(http.MethodPost, "/agent/request", token, req)
	var resp LibrarianResponse
	if res.status == http.StatusOK {
		res.json(h.t, &resp)
	}
	return res, resp
}

func (h *harness) status(token, id string) (result, StatusResponse) {
	h.t.Helper()
	res := h.do(http.MethodGet, "/agent/status/"+id, token, nil)
	var st StatusResponse
	if res.status == http.StatusOK {
		res.json(h.t, &st)
	}
	return res, st
}

func mustStatus(t testing.TB, res result, want int) {
	t.Helper()
	if res.status != want {
		t.Fatalf("status %d, want %d: %s", res.status, want, res.body)
	}
}

// approvalRequest is the approval protocol's operation 1, an APPROVAL
// (docs/approval.md).
func approvalRequest() map[string]any {
	return map[string]any{
		"agent_id":     "claude-3",
		"session_id":   "sess-123",
		"request_type": "APPROVAL",
		"action":       "create",
		"target_type":  "design",
		"target_path":  "docs/design/new-feature.md",
		"content":      "# New Feature Design\n...",
		"rationale":    "Implementing user story US-123",
		"references":   []string{"arch-001", "req-045"},
		"deviations":   []any{},
	}
}

func states(hist []Transition) []State {
	out := make([]State, len(hist))
	for i, t := range hist {
		out[i] = t.State
	}
	return out
}

var errBoom = errors.New("boom")

// The policy package's engine and RBAC plug in as they are.
var (
	_ Decider    = (*policy.Engine)(nil)
	_ Authorizer = (*policy.RBAC)(nil)
)
