package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/internal/httpx"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/compact"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/internal/names"
	"github.com/sacpgw/gateway/internal/scope"
	sj "github.com/sacpgw/gateway/internal/strictjson"
	"github.com/sacpgw/gateway/policy"
)

// Audit kinds of the registry's actions.
const (
	// KindSpawn is a SPAWN_AGENT decision and registration.
	KindSpawn = "registry.spawn"
	// KindRetire is a person's retiring of a spawned agent.
	KindRetire = "registry.retire"
)

// Spawner is the spawn policy (policy.Engine).
type Spawner interface {
	Spawn(ctx context.Context, input map[string]any) (policy.SpawnDecision, error)
}

// Escalator opens a human review (approval.Service).
type Escalator interface {
	Open(ctx context.Context, req escalation.Request) (escalation.Opened, error)
}

// API serves POST /sacp/validate, /registry/query and /registry/spawn, and
// GET /registry/verbs, /registry/tools and /registry/agents.
// Every route runs behind identity (the agent is in the request scope).
type API struct {
	Registry  *Registry
	Policy    Spawner
	Audit     *door.Recorder
	Escalator Escalator
	Log       *slog.Logger
	// Egress is where the gateway may send messages; a spawn naming an
	// address outside it is refused at once (the dial is checked anyway).
	Egress egress.Policy
	// People authenticates the admin who retires a spawned agent.
	People People
}

// readBody reads the body within the agent's max_request_size.
func readBody(r *http.Request) ([]byte, error) {
	return httpx.ReadLimited(r, int64(scope.Get(r.Context()).Agent.MaxRequestSize))
}

// Validate serves POST /sacp/validate: {"status":"VALID"} (200) or the
// compact SACP ERR object (422), against the library including spawned tools.
func (a *API) Validate(w http.ResponseWriter, r *http.Request) {
	raw, err := readBody(r)
	if err != nil {
		httpx.Fail(w, r, err)
		return
	}
	lib, err := a.Registry.Library(r.Context())
	if err != nil {
		a.Log.Warn("registry: validating against the last known library", "error", err.Error())
	}
	res := lib.Validate(raw)
	status := http.StatusOK
	if !res.Valid() {
		status = http.StatusUnprocessableEntity
	}
	httpx.WriteJSON(w, r, status, res)
}

// QueryList is the answer of POST /registry/query.
type QueryList struct {
	Object string `json:"object"`
	Query  Query  `json:"query"`
	TopK   int    `json:"top_k"`
	Answer
}

// Query serves POST /registry/query: {"query": {text?, verb?, inputs?,
// output_type?, tags?}, "top_k"?: 1..50 (default 5)}, at least one
// criterion (the bare inner object, with top_k beside its members, is
// accepted too). Registry.Search ranks; the querying agent's identity is
// the one a semantic ranking embeds the text as.
func (a *API) Query(w http.ResponseWriter, r *http.Request) {
	raw, err := readBody(r)
	if err != nil {
		httpx.Fail(w, r, err)
		return
	}
	q, topK, err := decodeQuery(raw)
	if err != nil {
		httpx.Fail(w, r, err)
		return
	}
	ans, err := a.Registry.Search(r.Context(), scope.Get(r.Context()).Agent.ID, q, topK)
	if err != nil {
		a.Log.Warn("registry: answering from the last known registry", "error", err.Error())
	}
	if q.Inputs == nil {
		q.Inputs = []string{}
	}
	httpx.WriteJSON(w, r, http.StatusOK, QueryList{Object: "list", Query: q, TopK: topK, Answer: ans})
}

// Bounds of a query's values.
const (
	maxQueryValue = 128  // verb, output_type, an input, a tag
	maxQueryText  = 1024 // text
	maxQueryList  = 64   // inputs, tags
)

// queryFields is the shape of a query body: {"query": {...}, "top_k"} or
// the bare inner object (with top_k), whose members are then Query's own.
var queryFields = func() *sj.Fields {
	q := sj.FromStruct(reflect.TypeOf(Query{}))
	m := map[string]*sj.Fields{"query": q, "top_k": nil}
	for _, name := range q.Names() {
		m[name] = nil // strings and lists of strings: nothing below to name
	}
	return sj.Object(m)
}()

// decodeQuery reads a query body once strictly (internal/strictjson): a
// name repeated at any depth, or one that differs from a known name only by
// case, is refused, so the query answered is the one every reader of the
// body sees (encoding/json, below, would keep the last of two and match
// "Verb" to verb). topK is DefaultTopK when the body sets none.
func decodeQuery(raw []byte) (q Query, topK int, err error) {
	if err := sj.Check(raw, queryFields); err != nil {
		param := ""
		if se, ok := errors.AsType[*sj.Error](err); ok {
			param = se.Path
		}
		return Query{}, 0, apierror.BadRequest(param, "Invalid query body: %v.", err)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return Query{}, 0, apierror.BadRequest("", "The body must be a JSON object: %v.", err)
	}
	var k *int
	if _, ok := probe["query"]; ok {
		for name := range probe {
			if name != "query" && name != "top_k" {
				return Query{}, 0, apierror.BadRequest("query", "Send {\"query\": {...}, \"top_k\": n} with nothing else beside the query.")
			}
		}
		var body struct {
			Query *Query `json:"query"`
			TopK  *int   `json:"top_k"`
		}
		if err := strictDecode(raw, &body); err != nil {
			return Query{}, 0, err
		}
		if body.Query != nil {
			q = *body.Query
		}
		k = body.TopK
	} else {
		var body struct {
			Query
			TopK *int `json:"top_k"`
		}
		if err := strictDecode(raw, &body); err != nil {
			return Query{}, 0, err
		}
		q, k = body.Query, body.TopK
	}
	topK = DefaultTopK
	if k != nil {
		if *k < 1 || *k > MaxTopK {
			return Query{}, 0, apierror.BadRequest("top_k", "top_k must be an integer from 1 to %d.", MaxTopK)
		}
		topK = *k
	}
	if err := checkQuery(q); err != nil {
		return Query{}, 0, err
	}
	return q, topK, nil
}

func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apierror.BadRequest("query", "Invalid query (want text, verb, inputs, output_type, tags; top_k): %v.", err)
	}
	return nil
}

// checkQuery bounds a decoded query and requires a criterion.
func checkQuery(q Query) error {
	if strings.TrimSpace(q.Text) == "" && q.Verb == "" && len(q.Inputs) == 0 && q.OutputType == "" && len(q.Tags) == 0 {
		return apierror.BadRequest("query", "The query needs at least one of text, verb, inputs, output_type and tags.")
	}
	if len(q.Text) > maxQueryText {
		return apierror.BadRequest("query.text", "The query text is at most %d bytes.", maxQueryText)
	}
	if q.Text != "" && strings.TrimSpace(q.Text) == "" {
		return apierror.BadRequest("query.text", "The query text is blank.")
	}
	if len(q.Inputs) > maxQueryList {
		return apierror.BadRequest("query.inputs", "At most %d inputs.", maxQueryList)
	}
	if len(q.Tags) > maxQueryList {
		return apierror.BadRequest("query.tags", "At most %d tags.", maxQueryList)
	}
	for _, s := range append([]string{q.Verb, q.OutputType}, q.Inputs...) {
		if len(s) > maxQueryValue {
			return apierror.BadRequest("query", "Query values are at most %d bytes.", maxQueryValue)
		}
	}
	for _, t := range q.Tags {
		if t == "" || len(t) > maxQueryValue {
			return apierror.BadRequest("query.tags", "Tags are 1 to %d bytes.", maxQueryValue)
		}
	}
	return nil
}

// SpawnResult is the answer of POST /registry/spawn.
type SpawnResult struct {
	Status         string   `json:"status"`
	AgentName      string   `json:"agent_name"`
	Reasons        []string `json:"reasons"`
	DecisionID     string   `json:"decision_id"`
	Agent          *Entry   `json:"agent,omitempty"`
	RequestID      string   `json:"request_id,omitempty"`
	HumanReviewURL string   `json:"human_review_url,omitempty"`
	// Token is the new agent's bearer token, in this answer only (the
	// gateway keeps its SHA-256); TokenNote says so, and when it is valid.
	Token     string `json:"token,omitempty"`
	TokenNote string `json:"token_note,omitempty"`
	// Prompt is the compact SACP system prompt for the new agent.
	Prompt string `json:"prompt,omitempty"`
}

// What a spawn's answer says of its token.
const (
	tokenNoteApproved  = "Shown once: the gateway keeps only its SHA-256. The new agent sends it as 'Authorization: Bearer <token>'; it expires when the agent has not authenticated for registry.spawn.ttl."
	tokenNoteEscalated = "Valid once a person approves the spawn. Shown once: the gateway keeps only its SHA-256. The new agent sends it as 'Authorization: Bearer <token>'."
)

// Spawn serves POST /registry/spawn: a compact SACP SPAWN_AGENT message.
// Rego data.gateway.spawn.decision approves (201: the agent is
// registered, for every replica), rejects (403 policy_denied) or escalates
// (202: a person decides on /review/{request_id}; the agent polls
// GET /agent/status/{request_id}).
func (a *API) Spawn(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ex := scope.Get(ctx)
	raw, err := readBody(r)
	if err != nil {
		httpx.Fail(w, r, err)
		return
	}
	ex.PayloadSHA256 = sha256Hex(raw)
	lib, lerr := a.Registry.Library(ctx)
	if lerr != nil {
		a.Log.Warn("registry: checking the spawn against the last known library", "error", lerr.Error())
	}
	sp, res := lib.ParseSpawn(raw)
	if res.Valid() {
		res = checkName(sp.AgentName)
	}
	if !res.Valid() {
		httpx.WriteJSON(w, r, http.StatusUnprocessableEntity, res)
		return
	}
	if err := a.checkEndpoint(sp.Endpoint); err != nil {
		httpx.Fail(w, r, err)
		return
	}
	var msg any
	_ = json.Unmarshal(raw, &msg)
	in := map[string]any{
		"agent":   policy.AgentInput(ex.Agent),
		"message": msg,
		"spawn": map[string]any{
			"agent_name": sp.AgentName, "verb": sp.Verb, "tool": sp.Tool, "description": sp.Description,
			"inputs": policy.StringsInput(sp.Inputs), "outputs": policy.StringsInput(sp.Outputs),
			"missing_capability": sp.MissingCapability, "endpoint": sp.Endpoint,
		},
	}
	// A policy that did not decide in time is a fail-closed rejection,
	// audited and answered like any other (not an upstream's timeout).
	dec, err := a.Policy.Spawn(ctx, in)
	if err != nil {
		a.Log.Warn("spawn policy did not decide", "agent", ex.Agent.ID, "error", err.Error())
	}
	out := SpawnResult{Status: dec.Status, AgentName: sp.AgentName, Reasons: nonNil(dec.Reasons), DecisionID: dec.DecisionID}
	sum := audit.Members("agent_name", sp.AgentName, "verb", sp.Verb, "tool", sp.Tool, "decision", dec.Status,
		"reasons", dec.Reasons, "decision_id", dec.DecisionID, "revision", dec.Revision, "fail_closed", dec.FailClosed, "route", "/registry/spawn")
	// An approved or escalated spawn gets its token now: the requester can
	// hand it over while a person decides. Only the hash is kept.
	var token, tokenSum string
	if dec.Status == "approved" || dec.Status == "escalated" {
		if token, tokenSum, err = newToken(); err != nil {
			httpx.Fail(w, r, err)
			return
		}
	}
	switch dec.Status {
	case "approved":
		a.spawnApproved(w, r, sp, sum, out, token, tokenSum)
	case "escalated":
		a.spawnEscalated(w, r, raw, sp, dec, sum, out, token, tokenSum)
	default:
		if err := a.write(ctx, ex, sum); err != nil {
			httpx.Fail(w, r, err)
			return
		}
		httpx.Fail(w, r, apierror.Forbidden("Spawn rejected by policy: "+strings.Join(dec.Reasons, "; ")+"."))
	}
}

// spawnApproved registers an approved spawn and answers 201 with its
// token; a spawn the registry refuses is audited and answered 409 or 400.
func (a *API) spawnApproved(w http.ResponseWriter, r *http.Request, sp *compact.Spawn, sum *audit.Object, out SpawnResult, token, tokenSum string) {
	ctx := r.Context()
	ex := scope.Get(ctx)
	e, err := a.Registry.Spawn(ctx, sp, "agent:"+ex.Agent.ID, tokenSum)
	if err != nil {
		sum.Bool("registered", false)
		sum.Str("error", err.Error())
		if aerr := a.write(ctx, ex, sum); aerr != nil {
			httpx.Fail(w, r, aerr)
			return
		}
		if errors.Is(err, ErrExists) {
			httpx.Fail(w, r, &apierror.Error{Status: http.StatusConflict, Type: apierror.TypeInvalidRequest, Code: "agent_exists", Param: "plan",
				Message: fmt.Sprintf("Agent %q is already registered.", sp.AgentName)})
			return
		}
		httpx.Fail(w, r, apierror.BadRequest("plan", "The spawn conflicts with the registry: %v.", err))
		return
	}
	sum.Bool("registered", true)
	sum.Bool("token_issued", true)
	if err := a.write(ctx, ex, sum); err != nil {
		httpx.Fail(w, r, err)
		return
	}
	out.Agent = &e
	out.Token, out.TokenNote, out.Prompt = token, tokenNoteApproved, agentPrompt(e)
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, r, http.StatusCreated, out)
}

// spawnEscalated keeps the token's hash, opens the review and answers 202
// with the token, which works once a person approves.
func (a *API) spawnEscalated(w http.ResponseWriter, r *http.Request, raw []byte, sp *compact.Spawn, dec policy.SpawnDecision, sum *audit.Object, out SpawnResult, token, tokenSum string) {
	ctx := r.Context()
	ex := scope.Get(ctx)
	// The hash is kept before the review opens: a person must never be
	// able to approve a spawn whose token is not on record.
	key := pendingKey(ex.Agent.ID, string(raw))
	if err := a.Registry.holdToken(ctx, key, tokenSum); err != nil {
		httpx.Fail(w, r, err)
		return
	}
	rec, err := a.Escalator.Open(ctx, escalation.Request{
		Type: escalation.TypeSpawn, AgentID: ex.Agent.ID, SessionID: ex.SessionID, Action: "spawn " + sp.AgentName,
		Content: string(raw), Reason: strings.Join(dec.Reasons, "; "), DecisionID: dec.DecisionID, Revision: dec.Revision,
	})
	if err != nil {
		if _, _, terr := a.Registry.takeToken(context.WithoutCancel(ctx), key); terr != nil {
			a.Log.Warn("registry: dropping the token hash of a spawn that could not be escalated", "agent", ex.Agent.ID, "error", terr.Error())
		}
		httpx.Fail(w, r, fmt.Errorf("registry: escalate spawn: %w", err))
		return
	}
	sum.Any("escalation_id", rec.ID)
	sum.Bool("token_issued", true)
	if err := a.write(ctx, ex, sum); err != nil {
		httpx.Fail(w, r, err)
		return
	}
	out.RequestID, out.HumanReviewURL = rec.ID, rec.ReviewURL
	out.Token, out.TokenNote = token, tokenNoteEscalated
	out.Prompt = agentPrompt(spawnEntry(sp, "agent:"+ex.Agent.ID, time.Time{}))
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, r, http.StatusAccepted, out)
}

func (a *API) write(ctx context.Context, ex *scope.Exchange, sum *audit.Object) error {
	return a.Audit.Write(ctx, audit.Record{Kind: KindSpawn, AgentID: ex.Agent.ID, SessionID: ex.SessionID, RequestID: ex.RequestID,
		PayloadSHA256: ex.PayloadSHA256, Object: sum})
}

// Resolve is the approval service's Resolver for TypeSpawn: a person's
// approval registers the agent the message asked for, with the token
// handed out when it was asked for. Either way the kept token hash is
// taken: a rejected spawn's token never becomes valid.
func (a *API) Resolve(ctx context.Context, rec escalation.Decided) error {
	tokenSum, held, terr := a.Registry.takeToken(ctx, pendingKey(rec.AgentID, rec.Content))
	if !rec.Approved {
		return terr
	}
	if terr != nil {
		// Fail closed: registering without the hash would make the token
		// the requester holds useless, and guessing is not an option.
		return fmt.Errorf("registry: approved spawn %s: %w", rec.ID, terr)
	}
	raw := []byte(rec.Content)
	lib, _ := a.Registry.Library(ctx)
	sp, res := lib.ParseSpawn(raw)
	if res.Valid() {
		res = checkName(sp.AgentName)
	}
	if !res.Valid() {
		return fmt.Errorf("registry: approved spawn %s no longer valid: %s %s", rec.ID, res.Code, res.Details)
	}
	if err := a.checkEndpoint(sp.Endpoint); err != nil {
		return fmt.Errorf("registry: approved spawn %s: %w", rec.ID, err)
	}
	if names.Check(rec.AgentID) != nil {
		return fmt.Errorf("registry: approved spawn %s names no requesting agent", rec.ID)
	}
	reviewer := "person"
	if rec.Reviewer != "" {
		reviewer = rec.Reviewer
	}
	// The spawner is the agent that asked (the one the new agent answers
	// to); the person who approved is in the audit entry. No hash held
	// (expired after registry.spawn.ttl, or asked for before spawns had
	// tokens): the agent is registered as approved but cannot
	// authenticate; the audit entry says so.
	_, err := a.Registry.Spawn(ctx, sp, "agent:"+rec.AgentID, tokenSum)
	sum := audit.Members("agent_name", sp.AgentName, "decision", "approved", "via", "review", "reviewer", reviewer,
		"escalation_id", rec.ID, "registered", err == nil, "token_issued", held && err == nil)
	if err != nil {
		sum.Str("error", err.Error())
	}
	if aerr := a.Audit.Write(ctx, audit.Record{Kind: KindSpawn, AgentID: rec.AgentID, RequestID: rec.ID, PayloadSHA256: sha256Hex(raw), Object: sum}); aerr != nil && err == nil {
		err = aerr
	}
	return err
}

// People authenticates the admin and reviewers (approval.Service.Person):
// who is "admin:<name>" or "reviewer:<name>"; a refusal is the error to
// send, audited already.
type People interface {
	Person(r *http.Request) (who string, err error)
}

// Retire serves DELETE /registry/agents/{id} to the admin: the spawned
// agent id is removed (its token stops working, it receives nothing and
// leaves queries). 204 when done; 403 for a reviewer (retiring is not a
// review decision); 404 for an agent that is not a spawned one, a
// configured agent included (agents.yaml is changed by editing it). Every
// attempt by an authenticated person is audited as registry.retire.
func (a *API) Retire(people People) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, err := people.Person(r)
		if err != nil {
			httpx.Fail(w, r, err)
			return
		}
		ctx := r.Context()
		name := r.PathValue("id")
		sum := audit.Members("agent_name", clipName(name), "by", who, "route", "/registry/agents/{id}", "retired", false)
		var fail error
		switch {
		case !strings.HasPrefix(who, "admin:"):
			sum.Str("reason", "not an admin")
			fail = apierror.Forbidden("Only the admin may retire an agent.")
		case names.Check(name) != nil:
			sum.Str("reason", "not an agent name")
			fail = retireNotFound(name)
		default:
			switch err := a.Registry.Retire(ctx, name); {
			case err == nil:
				sum.Bool("retired", true)
			case errors.Is(err, ErrConfigured):
				sum.Str("reason", "configured agent")
				fail = &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "agent_not_found", Param: "id",
					Message: fmt.Sprintf("Agent %q is configured in agents.yaml, not spawned: remove it there.", name)}
			case errors.Is(err, ErrNotFound):
				sum.Str("reason", "no such spawned agent")
				fail = retireNotFound(name)
			default:
				httpx.Fail(w, r, err)
				return
			}
		}
		var reqID, session string
		if ex := scope.Lookup(ctx); ex != nil {
			reqID, session = ex.RequestID, ex.SessionID
		}
		if aerr := a.Audit.Write(ctx, audit.Record{Kind: KindRetire, AgentID: auditAgent(name), SessionID: session, RequestID: reqID, Object: sum}); aerr != nil {
			httpx.Fail(w, r, aerr)
			return
		}
		if fail != nil {
			httpx.Fail(w, r, fail)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func retireNotFound(name string) error {
	return &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "agent_not_found", Param: "id",
		Message: fmt.Sprintf("No spawned agent %q.", clipName(name))}
}

// auditAgent is the record's agent: the retired agent, when the path
// named a valid one (anything else stays in the summary only).
func auditAgent(name string) string {
	if names.Check(name) != nil {
		return ""
	}
	return name
}

// clipName bounds a name from the path in a message.
func clipName(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// checkName applies the one rule for agent names to a spawned agent's name
// (the instantiate step's second element).
func checkName(name string) compact.Result {
	if err := names.Check(name); err != nil {
		return compact.Result{Status: compact.StatusErr, Code: compact.CodeInvalidParams, Details: "the agent's name: " + err.Error(), Path: "plan"}
	}
	return compact.Result{Status: compact.StatusValid}
}

// checkEndpoint accepts the endpoint a spawn names (the instantiate
// step's "endpoint" param): an http or https URL without credentials, or
// none. The spawn policy sees it in input.spawn.endpoint and should
// restrict it (the gateway will POST to it).
func (a *API) checkEndpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return apierror.BadRequest("plan", "The instantiate step's endpoint must be an http or https URL without credentials.")
	}
	if err := a.Egress.CheckURLHost(u.Host); err != nil {
		return &apierror.Error{Status: http.StatusUnprocessableEntity, Type: apierror.TypeInvalidRequest, Code: "INVALID_PARAMS", Param: "plan",
			Message: "The instantiate step's endpoint is an address the gateway does not send to (loopback, private, link-local or metadata ranges are refused unless messaging.allowed_networks lists them)."}
	}
	return nil
}

// Routes are the registry's endpoints: validating, querying and spawning
// spend one request of the caller's rate_limit; reading the library and
// the agents does not; retiring a spawned agent is the admin's (People).
func (a *API) Routes() []door.Route {
	return []door.Route{
		{Method: http.MethodPost, Path: "/sacp/validate", Handler: http.HandlerFunc(a.Validate), Access: door.Metered},
		{Method: http.MethodPost, Path: "/registry/query", Handler: http.HandlerFunc(a.Query), Access: door.Metered},
		{Method: http.MethodPost, Path: "/registry/spawn", Handler: http.HandlerFunc(a.Spawn), Access: door.Metered},
		{Method: http.MethodGet, Path: "/registry/verbs", Handler: http.HandlerFunc(a.Verbs), Access: door.Agent},
		{Method: http.MethodGet, Path: "/registry/tools", Handler: http.HandlerFunc(a.Tools), Access: door.Agent},
		{Method: http.MethodGet, Path: "/registry/agents", Handler: http.HandlerFunc(a.Agents), Access: door.Agent},
		{Method: http.MethodDelete, Path: "/registry/agents/:id", Handler: a.Retire(a.People), Access: door.People},
	}
}

// Prepare implements door.Door: the registry takes the new agents, verbs
// and tools.
func (a *API) Prepare(cfg *config.Config) (apply func(), err error) { return a.Registry.Prepare(cfg) }

var _ door.Door = (*API)(nil)
