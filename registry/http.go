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

// KindSpawn is the audit kind of a SPAWN_AGENT decision and registration.
const KindSpawn = "registry.spawn"

// Spawner is the spawn policy (policy.Engine).
type Spawner interface {
	Spawn(ctx context.Context, input map[string]any) (policy.SpawnDecision, error)
}

// Escalator opens a human review (approval.Service).
type Escalator interface {
	Open(ctx context.Context, req escalation.Request) (escalation.Opened, error)
}

// API serves POST /sacp/validate, /registry/query and /registry/spawn.
// Every route runs behind identity (the agent is in the request scope).
type API struct {
	Registry  *Registry
	Policy    Spawner
	Audit     *httpx.Recorder
	Escalator Escalator
	Log       *slog.Logger
	// Egress is where the gateway may send messages; a spawn naming an
	// address outside it is refused at once (the dial is checked anyway).
	Egress egress.Policy
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
}

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
	sum := map[string]any{"agent_name": sp.AgentName, "verb": sp.Verb, "tool": sp.Tool, "decision": dec.Status,
		"reasons": dec.Reasons, "decision_id": dec.DecisionID, "revision": dec.Revision, "fail_closed": dec.FailClosed, "route": "/registry/spawn"}
	switch dec.Status {
	case "approved":
		e, err := a.Registry.Spawn(ctx, sp, "agent:"+ex.Agent.ID)
		if err != nil {
			sum["registered"], sum["error"] = false, err.Error()
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
		sum["registered"] = true
		if err := a.write(ctx, ex, sum); err != nil {
			httpx.Fail(w, r, err)
			return
		}
		out.Agent = &e
		httpx.WriteJSON(w, r, http.StatusCreated, out)
	case "escalated":
		rec, err := a.Escalator.Open(ctx, escalation.Request{
			Type: escalation.TypeSpawn, AgentID: ex.Agent.ID, SessionID: ex.SessionID, Action: "spawn " + sp.AgentName,
			Content: string(raw), Reason: strings.Join(dec.Reasons, "; "), DecisionID: dec.DecisionID, Revision: dec.Revision,
		})
		if err != nil {
			httpx.Fail(w, r, fmt.Errorf("registry: escalate spawn: %w", err))
			return
		}
		sum["escalation_id"] = rec.ID
		if err := a.write(ctx, ex, sum); err != nil {
			httpx.Fail(w, r, err)
			return
		}
		out.RequestID, out.HumanReviewURL = rec.ID, rec.ReviewURL
		httpx.WriteJSON(w, r, http.StatusAccepted, out)
	default:
		if err := a.write(ctx, ex, sum); err != nil {
			httpx.Fail(w, r, err)
			return
		}
		httpx.Fail(w, r, apierror.Forbidden("Spawn rejected by policy: "+strings.Join(dec.Reasons, "; ")+"."))
	}
}

func (a *API) write(ctx context.Context, ex *scope.Exchange, sum map[string]any) error {
	return a.Audit.Write(ctx, audit.Record{Kind: KindSpawn, AgentID: ex.Agent.ID, SessionID: ex.SessionID, RequestID: ex.RequestID,
		PayloadSHA256: ex.PayloadSHA256, Summary: sum})
}

// Resolve is the approval service's Resolver for TypeSpawn: a person's
// approval registers the agent the message asked for.
func (a *API) Resolve(ctx context.Context, rec escalation.Decided) error {
	if !rec.Approved {
		return nil
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
	by := "person"
	if rec.Reviewer != "" {
		by = rec.Reviewer
	}
	_, err := a.Registry.Spawn(ctx, sp, by)
	sum := map[string]any{"agent_name": sp.AgentName, "decision": "approved", "via": "review", "reviewer": by,
		"escalation_id": rec.ID, "registered": err == nil}
	if err != nil {
		sum["error"] = err.Error()
	}
	if aerr := a.Audit.Write(ctx, audit.Record{Kind: KindSpawn, AgentID: rec.AgentID, RequestID: rec.ID, PayloadSHA256: sha256Hex(raw), Summary: sum}); aerr != nil && err == nil {
		err = aerr
	}
	return err
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
