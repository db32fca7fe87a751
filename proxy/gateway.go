package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/ledger"
	"github.com/sacpgw/gateway/internal/pricing"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/team"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/upstream"
)

// Deps are what the gateway's OpenAI front door needs; every field is required.
type Deps struct {
	Config    *config.Config
	Upstreams *upstream.Set
	Requests  limit.Limiter
	Tokens    limit.Budget
	Log       *slog.Logger
	// Audit is the one recorder of the audit trail (door.NewRecorder); nil
	// disables auditing (tests of other stages only).
	Audit *door.Recorder
	// SidecarAgent, when set, is the agent every request acts as (sidecar
	// mode; see door.Identifier).
	SidecarAgent string
	// KeepAlive is the SSE keep-alive interval while a protocol answer is
	// gathered and validated. Zero: 5s.
	KeepAlive time.Duration
	// Policies is the Rego engine (chat.deny, guardrails); nil: no policy
	// stage, and the audit entries say "not_evaluated".
	Policies Policies
	// Library is the verb/tool library sacp_compact answers are validated
	// against (registry.Registry); nil: an empty library.
	Library LibrarySource
	// Spawned finds the agents registered at run time by their token
	// (registry.Registry); nil: only the configured agents authenticate.
	Spawned door.SpawnedAgents
	// Keys finds the keys issued through the admin API.
	Keys door.RuntimeKeys
	// Spend counts what agents spend (the metrics); nil: not counted.
	Spend *Spend
	// Responses keeps the Responses API's conversations (previous_response_id),
	// shared across reloads; nil: a memory store of this Gateway's own.
	Responses *ResponseState
	// Teams finds the teams created at run time; nil: teams.yaml's only.
	Teams team.Source
	// Usage records the usage per day, per agent and team; nil: not recorded.
	Usage *ledger.Recorder
}

// Gateway holds the compiled chains of the OpenAI-compatible API.
type Gateway struct {
	chat, embeddings, models http.Handler
	// messages and responses are the chat chain under the Anthropic
	// Messages and the OpenAI Responses dialects; count is the Messages
	// API's token count (count.go).
	messages, responses, count http.Handler
	upstreams                  *upstream.Set
	audit                      *door.Recorder
	ident                      *door.Identifier

	// azure is the chat and embeddings chains under Azure OpenAI's
	// deployments routes (azure.go).
	azure azureRoutes
}

// New compiles the chains once, at startup.
func New(d Deps) (*Gateway, error) {
	switch {
	case d.Config == nil, d.Upstreams == nil, d.Requests == nil, d.Tokens == nil, d.Log == nil:
		return nil, errors.New("proxy: Config, Upstreams, Requests, Tokens and Log are required")
	}
	rec := d.Audit
	gate, err := door.NewGate(d.Config, door.GateDeps{Sidecar: d.SidecarAgent, Spawned: d.Spawned, Keys: d.Keys, Requests: d.Requests, Audit: rec, Log: d.Log, Teams: d.Teams})
	if err != nil {
		return nil, err
	}
	ident := gate.Ident
	lim := &Limits{Requests: d.Requests, Tokens: d.Tokens, Audit: rec, Prices: pricing.New(d.Config.Gateway.Pricing), Spend: d.Spend, Usage: d.Usage}
	var red *redact.Redactor
	if rc := d.Config.Protocol.Redaction; len(rc.Detectors) > 0 {
		// "detectors: []" turns redaction off (config fills in all
		// detectors when the key is absent).
		red, err = redact.New(redact.Config{Detectors: rc.Detectors, Replacement: rc.Replacement, Block: rc.Block})
		if err != nil {
			return nil, fmt.Errorf("redaction: %w", err)
		}
	}
	keepAlive := d.KeepAlive
	if keepAlive <= 0 {
		keepAlive = 5 * time.Second
	}
	fwd := &Forwarder{Timeout: d.Config.Protocol.Timeouts.Response.D(), Log: d.Log, Audit: rec, Redactor: red,
		KeepAlive: keepAlive, StreamIdle: d.Config.Protocol.Timeouts.StreamIdle.D()}
	proto, err := NewProtocol(d.Config, red, rec)
	if err != nil {
		return nil, err
	}
	if d.KeepAlive > 0 {
		proto.KeepAlive = d.KeepAlive
	}
	lim.Attempts = func(a *roster.Agent) int {
		if proto.Applies(a) && proto.Reask {
			return proto.MaxAttempts
		}
		return 1
	}
	agentInputs := NewAgentInputs(d.Config.Agents)
	proto.Policies, proto.AgentInputs = d.Policies, agentInputs
	proto.Library, proto.Log = d.Library, d.Log
	g := &Gateway{upstreams: d.Upstreams, audit: rec, ident: ident}
	rd := newResponsesDialect(d.Responses, d.Config, d.Log)
	st := stageSet{
		stJournal: StageFunc(g.journalStage), stIdentify: ident,
		stReadChat: readBody(KindChat, policyReads(d.Policies, agentInputs)), stReadEmbeddings: ReadBody(KindEmbeddings), stReadCount: readCount(),
		stFromMessages: messagesDialect.readRequest(), stFromResponses: rd.readRequest(),
		stAzureChat: azureRequest(KindChat, "/chat/completions"), stAzureEmbeddings: azureRequest(KindEmbeddings, "/embeddings"),
		stModel: StageFunc(g.allowModel), stLimits: lim, stRate: StageFunc(lim.rateStage),
		stPolicy: nil, stRedact: nil, stInject: StageFunc(proto.Inject),
	}
	if d.Policies != nil {
		st[stPolicy] = ChatPolicy(d.Policies, agentInputs)
	}
	if d.Config.Protocol.Redaction.Requests && red != nil {
		st[stRedact] = RedactRequests(red)
	}
	complete := func(w http.ResponseWriter, r *http.Request) error {
		if proto.Applies(scope.Get(r.Context()).Agent) {
			return proto.Serve(w, r)
		}
		return fwd.ForwardChat(w, r)
	}
	// Order matters: the journal wraps everything so no refusal goes
	// unrecorded; identity next (every later stage is per agent), then the
	// body through the agent's size limit (a dialect's or the Azure
	// framing's request translated there), then the model check (a request
	// for a forbidden model must not spend the agent's rate), then the
	// limits, then the policy (a flood of requests must not buy policy
	// evaluations), then redaction (before the template goes in: only the
	// agent's own text is scanned), then the protocol prompt, then the
	// upstream call.
	g.chat = Chain(complete, st.chain(stJournal, stIdentify, stReadChat, stModel, stLimits, stPolicy, stRedact, stInject)...)
	// The dialects: the same stages, every answer translated at the edge.
	g.messages = messagesDialect.edge(Chain(complete, st.chain(stJournal, stIdentify, stFromMessages, stReadChat, stModel, stLimits, stPolicy, stRedact, stInject)...))
	g.responses = rd.edge(Chain(complete, st.chain(stJournal, stIdentify, stFromResponses, stReadChat, stModel, stLimits, stPolicy, stRedact, stInject)...))
	// The count: read and checked as a message, one request of the rate
	// spent (no tokens: nothing is generated), the policy asked, the
	// prompt redacted as a message's would be before it may leave; a
	// protocol agent's messages carry the protocol prompt, so does what
	// is counted.
	g.count = countDialect.edge(Chain(fwd.CountTokens, st.chain(stJournal, stIdentify, stReadCount, stModel, stRate, stPolicy, stRedact, stInject)...))
	g.embeddings = Chain(fwd.Forward, st.chain(stJournal, stIdentify, stReadEmbeddings, stModel, stLimits, stRedact)...)
	g.models = Chain(g.listModels, st.chain(stIdentify)...)
	// Azure's deployments routes: the Azure framing is checked after the
	// journal and identify, so a refusal of it is audited and names the
	// agent, then every stage runs as it does on /v1.
	g.azure = azureRoutes{
		chat:       Chain(complete, st.chain(stJournal, stIdentify, stAzureChat, stReadChat, stModel, stLimits, stPolicy, stRedact, stInject)...),
		embeddings: Chain(fwd.Forward, st.chain(stJournal, stIdentify, stAzureEmbeddings, stReadEmbeddings, stModel, stLimits, stRedact)...),
	}
	return g, nil
}

// ChatCompletions serves POST /v1/chat/completions.
func (g *Gateway) ChatCompletions() http.Handler { return g.chat }

// Embeddings serves POST /v1/embeddings.
func (g *Gateway) Embeddings() http.Handler { return g.embeddings }

// Models serves GET /v1/models.
func (g *Gateway) Models() http.Handler { return g.models }

// journalStage opens the exchange's journal for every later stage, and
// when the exchange ends without an entry (a refusal before any call: 400,
// 404, 413...) writes its llm.request entry. The refusal has already been
// sent then: the entry is written after it, as there is no answer left to
// withhold.
func (g *Gateway) journalStage(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	ex := scope.Get(r.Context())
	j, jr, end := door.Open(r, g.audit)
	defer end()
	next.ServeHTTP(w, jr)
	if j.Wrote() || ex.ErrCode == "" {
		return nil
	}
	s := requestSummary(ex, r)
	s.Int("status", int64(ex.Status))
	s.Str("error_code", ex.ErrCode)
	_ = j.Refused(r.Context(), record(ex, audit.KindLLMRequest, ex.PayloadSHA256, s))
	return nil
}

// allowModel refuses a model outside the agent's allow-list or served by no
// upstream, with OpenAI's 404 model_not_found, and chooses the order the
// upstreams serving it are tried in, once for the whole exchange (a
// re-ask does not draw the weighted order again).
func (g *Gateway) allowModel(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	ex := scope.Get(r.Context())
	if !Allowed(ex.Agent, ex.Model) {
		return apierror.ModelNotFound(ex.Model)
	}
	cands := g.upstreams.Candidates(ex.Model)
	if len(cands) == 0 {
		return apierror.ModelNotFound(ex.Model)
	}
	ex.Upstream, ex.Route, ex.Candidates = cands[0].Name, cands[0], cands
	next.ServeHTTP(w, r)
	return nil
}

// Allowed reports whether the agent's allow-list admits model (an empty
// list admits every routed model).
func Allowed(a *roster.Agent, model string) bool {
	if len(a.Models) == 0 {
		return true
	}
	for _, p := range a.Models {
		if ok, _ := path.Match(p, model); ok {
			return true
		}
	}
	return false
}

type modelList struct {
	Object string       `json:"object"`
	Data   []modelEntry `json:"data"`
}

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// listModels answers with the literal model names this agent may use.
func (g *Gateway) listModels(w http.ResponseWriter, r *http.Request) error {
	a := scope.Get(r.Context()).Agent
	list := modelList{Object: "list", Data: []modelEntry{}}
	seen := map[string]bool{}
	add := func(id, owner string) {
		if !seen[id] {
			seen[id] = true
			list.Data = append(list.Data, modelEntry{ID: id, Object: "model", Created: startEpoch, OwnedBy: owner})
		}
	}
	for _, m := range g.upstreams.Models() {
		if Allowed(a, m.ID) {
			add(m.ID, m.Upstream)
		}
	}
	for _, p := range a.Models {
		if up := g.upstreams.Route(p); up != nil && !isGlob(p) {
			add(p, up.Name)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(list)
}

// startEpoch (2024-01-01 UTC) stands in for a model's creation time, which
// the gateway does not know; a fixed value keeps the listing deterministic.
const startEpoch = 1704067200

func isGlob(p string) bool {
	for _, c := range p {
		switch c {
		case '*', '?', '[', '\\':
			return true
		}
	}
	return false
}
