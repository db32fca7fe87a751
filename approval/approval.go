// Package approval implements the approval protocol (Librarian approvals,
// docs/approval.md): agents ask for approval of a change, the Rego policy
// decides, people decide what the policy escalates, and every step is
// audited.
//
// A request moves PENDING → VALIDATING → APPROVED | REJECTED | ESCALATED;
// an ESCALATED one is approved or rejected by a reviewer (or rejected by
// expiry after timeouts.escalation), and an APPROVED one becomes COMPLETED
// when its agent REPORTs it done, or EXPIRED when it does not within
// timeouts.approval_validity. An approval is bound to the SHA-256 of the
// approved content: a REPORT claiming other content is a deviation and goes
// back to a person. Before the policy decides, the gateway looks up facts
// it cannot (facts.go): whether the target exists, whether the content
// matches its target type's template, whether the references form a cycle.
// Agents follow their requests' state changes on GET /agent/events, or at
// their callback_url.
//
// The handlers are plain net/http. Agent routes expect the gateway's
// identify stage in front of them (scope.Get(ctx).Agent is the caller);
// admin and review routes authenticate admin and reviewer tokens here.
package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/people"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
)

// Decider evaluates data.gateway.approval.decision (docs/reference.md, Rego
// decision points). The policy
// package's engine implements it; an error or undefined decision must be
// returned as an error, which the service turns into a rejection.
type Decider interface {
	Approval(ctx context.Context, input map[string]any) (policy.ApprovalDecision, error)
}

// Authz is the RBAC verdict passed to the policy as input.authz. It is the
// policy package's type, so its casbin enforcer (*policy.RBAC) is an
// Authorizer as it is.
type Authz = policy.Authz

// Authorizer is the RBAC check: may agentID perform action on a target of
// type target? action is policy.ActionFor's: "query" for a QUERY (target
// may then be empty), else the request's action (a REPORT's is the
// reported request's).
type Authorizer interface {
	Authorize(agentID, action, target string) Authz
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(agentID, action, target string) Authz

// Authorize implements Authorizer.
func (f AuthorizerFunc) Authorize(agentID, action, target string) Authz {
	return f(agentID, action, target)
}

// Metrics receives the service's measurements; *metrics.Metrics (package
// internal/metrics) implements it. Every label value comes from this
// package's code, never from a request.
type Metrics interface {
	// PolicyDecision counts a decision: point "approval", verdict the
	// decision's status (approved, rejected, escalated,
	// clarification_needed) after the service's own fail-closed checks.
	PolicyDecision(point, verdict string)
	// ApprovalEscalation counts a decided escalation by outcome:
	// approved, rejected (by a person) or expired.
	ApprovalEscalation(outcome string)
	// ApprovalValidation observes how long one policy evaluation took.
	ApprovalValidation(d time.Duration)
}

// metricsPoint is the decision point label of approval decisions.
const metricsPoint = "approval"

// noMetrics is the Metrics of a service given none.
type noMetrics struct{}

func (noMetrics) PolicyDecision(string, string)    {}
func (noMetrics) ApprovalEscalation(string)        {}
func (noMetrics) ApprovalValidation(time.Duration) {}

// Deps are the service's dependencies. Config, Decider, Authorizer, Store,
// Limiter, Audit, Catalogue and Log are required; the rest have defaults.
type Deps struct {
	Config     *config.Config
	Decider    Decider
	Authorizer Authorizer
	Store      Store
	// Limiter enforces Rate on POST /agent/request, keyed per agent.
	Limiter limit.Limiter
	// Rate is the per-agent limit of POST /agent/request. Zero: the approval
	// protocol's 60/minute.
	Rate limit.Rule
	// Audit receives agent.request, agent.decision and escalation.decision;
	// in closed fail mode an entry that cannot be written stops the
	// request (503 audit_unavailable) and nothing is approved, otherwise
	// the failure is logged and the request served.
	Audit     *door.Recorder
	Catalogue *Catalogue
	// BaseURL is the gateway's external URL (https://gw.example.org), used in
	// human_review_url and webhook messages. Empty: relative URLs.
	BaseURL string
	// Webhook is a Slack-compatible incoming-webhook URL notified of each
	// escalation. Empty: no notification.
	Webhook string
	// HTTPClient posts to Webhook and makes every call to the people's
	// identity provider (people.oidc). Nil: a client with a 5s timeout.
	HTTPClient *http.Client
	// Log receives failures the client does not see (webhook, expiry,
	// audit errors in open mode).
	Log *slog.Logger
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
	// SessionTTL bounds a reviewer's sign-in. Zero: 8 hours.
	SessionTTL time.Duration
	// Retention is how long a REJECTED, COMPLETED or EXPIRED record stays
	// readable in a store that prunes (the memory store). Zero: 7 days.
	Retention time.Duration
	// Metrics receives decision counts and policy timings (gateway
	// /metrics). Nil: nothing is measured.
	Metrics Metrics
	// EventKeepAlive is how often an idle GET /agent/events stream gets a
	// comment, so that proxies and the server's write idle bound keep it.
	// Zero: 15 seconds.
	EventKeepAlive time.Duration
}

// Service serves the approval API. Create it with New.
type Service struct {
	decider    Decider
	store      Store
	limiter    limit.Limiter
	audit      *door.Recorder
	client     *http.Client
	log        *slog.Logger
	now        func() time.Time
	sessionTTL time.Duration
	retention  time.Duration
	metrics    Metrics
	// notifying bounds and tracks webhook goroutines, and tracks the
	// event and callback queues' goroutines.
	notifySlots chan struct{}
	notifying   sync.WaitGroup
	// Events (events.go): the streams of this replica, the bus between
	// replicas (nil: this process only), the queue of events to publish
	// and each agent's queue of callbacks.
	hub         *hub
	bus         EventBus
	publishing  *queue
	callbacksMu sync.Mutex
	callbacks   map[string]*queue
	keepAlive   time.Duration
	// stop is closed when Run ends: streams end, callbacks stop retrying.
	stop     chan struct{}
	stopOnce sync.Once
	// set is what a config reload replaces (Reload).
	set atomic.Pointer[settings]
	// ext acts on decisions on other components' escalations.
	ext resolvers
}

// settings are the configuration-dependent parts of the service.
type settings struct {
	cfg     *config.Config
	authz   Authorizer
	cat     *Catalogue
	rate    limit.Rule
	baseURL string
	webhook string
	// creds are the admin's and reviewers' token hashes; tokens whether
	// they sign in to the pages (people.token_sign_in).
	creds  []credential
	tokens bool
	// rp signs people in with the organisation's provider
	// (people.oidc); nil: no such sign-in.
	rp *people.RP
	// knownRefs and protocolIn are parts of the policy input that do not
	// change per request, built once.
	knownRefs  []any
	protocolIn map[string]any
}

func (s *Service) newSettings(cfg *config.Config, authz Authorizer, cat *Catalogue, rate limit.Rule, baseURL, webhook string) *settings {
	if rate.IsZero() {
		rate = limit.Rule{N: 60, Period: time.Minute}
	}
	return &settings{
		cfg: cfg, authz: authz, cat: cat, rate: rate, baseURL: strings.TrimRight(baseURL, "/"), webhook: webhook,
		creds: credentials(cfg), tokens: cfg.Gateway.People.TokensSignIn(), rp: s.rpFor(cfg.Gateway.People.OIDC),
		knownRefs: policy.StringsInput(cat.IDs()), protocolIn: policy.ProtocolInput(cfg.Protocol),
	}
}

// rpFor is the relying party of o: the one serving now when o is the
// same (it keeps its discovery), a new one otherwise; nil without o.
func (s *Service) rpFor(o *people.OIDC) *people.RP {
	if o == nil {
		return nil
	}
	if cur := s.set.Load(); cur != nil && cur.rp != nil && reflect.DeepEqual(cur.rp.Config(), o) {
		return cur.rp
	}
	return people.NewRP(o, s.client)
}

// cur is the configuration serving now.
func (s *Service) cur() *settings { return s.set.Load() }

// Prepare builds the service's settings for cfg (agents, RBAC, tokens,
// catalogue, limits, webhook) and returns apply, which serves them from
// the next request on; requests in flight finish under the settings they
// began with. Nothing changes unless apply is called.
func (s *Service) Prepare(cfg *config.Config) (apply func(), err error) {
	authz, err := policy.RBACFor(cfg.Dir, cfg.Agents, cfg.Gateway.Admin.ReviewerNames())
	if err != nil {
		return nil, err
	}
	cat, err := CatalogueFor(cfg)
	if err != nil {
		return nil, err
	}
	a := cfg.Gateway.Approval
	set := s.newSettings(cfg, authz, cat, limit.Rule{N: a.RateLimit.N, Period: a.RateLimit.Period}, a.BaseURL, a.Webhook)
	return func() { s.set.Store(set) }, nil
}

// CatalogueFor reads cfg's specification catalogue; the default directory
// may be absent (an empty catalogue).
func CatalogueFor(cfg *config.Config) (*Catalogue, error) {
	dir := cfg.Gateway.Approval.CatalogueDir
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return NewCatalogue(), nil
	}
	c, err := LoadCatalogue(dir)
	if err != nil {
		return nil, fmt.Errorf("approval.catalogue_dir: %w", err)
	}
	return c, nil
}

// New checks d and builds the service.
func New(d Deps) (*Service, error) {
	var missing []string
	for name, ok := range map[string]bool{
		"Config": d.Config != nil, "Decider": d.Decider != nil, "Authorizer": d.Authorizer != nil,
		"Store": d.Store != nil, "Limiter": d.Limiter != nil, "Audit": d.Audit != nil,
		"Catalogue": d.Catalogue != nil, "Log": d.Log != nil,
	} {
		if !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, errors.New("approval: missing dependencies: " + strings.Join(missing, ", "))
	}
	s := &Service{
		decider: d.Decider, store: d.Store,
		limiter: d.Limiter, audit: d.Audit,
		client: d.HTTPClient, log: d.Log, now: d.Now, retention: d.Retention,
		metrics: d.Metrics, keepAlive: d.EventKeepAlive,
		notifySlots: make(chan struct{}, 8), callbacks: map[string]*queue{}, stop: make(chan struct{}),
	}
	if s.metrics == nil {
		s.metrics = noMetrics{}
	}
	if s.keepAlive <= 0 {
		s.keepAlive = 15 * time.Second
	}
	// A store that is an event bus (Redis) carries events between
	// replicas; otherwise they stay in this process.
	s.bus, _ = d.Store.(EventBus)
	s.hub = &hub{subs: map[string]map[*subscriber]struct{}{}, bus: s.bus}
	s.publishing = &queue{wg: &s.notifying, onDrop: func() {
		s.log.Warn("approval event dropped: too many waiting to be published")
	}}
	if s.client == nil {
		s.client = &http.Client{Timeout: 5 * time.Second}
	}
	s.set.Store(s.newSettings(d.Config, d.Authorizer, d.Catalogue, d.Rate, d.BaseURL, d.Webhook))
	if s.now == nil {
		s.now = time.Now
	}
	if s.retention <= 0 {
		s.retention = 7 * 24 * time.Hour
	}
	s.sessionTTL = d.SessionTTL
	if s.sessionTTL <= 0 {
		s.sessionTTL = 8 * time.Hour
	}
	return s, nil
}

// Routes lists every endpoint of the service: the agents' approval API
// behind the identify stage, the escalations API and the review pages for
// people, who authenticate to the handlers themselves.
func (s *Service) Routes() []door.Route {
	return []door.Route{
		{Method: http.MethodPost, Path: "/agent/request", Handler: s.Submit(), Access: door.Agent},
		{Method: http.MethodGet, Path: "/agent/status/:id", Handler: s.Status(), Access: door.Agent},
		{Method: http.MethodGet, Path: "/agent/events", Handler: s.Events(), Access: door.Agent},
		{Method: http.MethodPost, Path: "/agent/context", Handler: s.Context(), Access: door.Agent},
		{Method: http.MethodGet, Path: "/agent/capabilities", Handler: s.Capabilities(), Access: door.Agent},
		{Method: http.MethodGet, Path: "/admin/escalations", Handler: s.Escalations(), Access: door.People},
		{Method: http.MethodPost, Path: "/admin/escalations/:id/decision", Handler: s.Decide(), Access: door.People},
		{Method: http.MethodGet, Path: "/review/login", Handler: s.ReviewLogin(), Access: door.People},
		{Method: http.MethodPost, Path: "/review/login", Handler: s.ReviewLogin(), Access: door.People},
		{Method: http.MethodGet, Path: "/review/oidc/login", Handler: endpoint(s.oidcLogin), Access: door.People},
		{Method: http.MethodGet, Path: people.CallbackPath, Handler: endpoint(s.oidcCallback), Access: door.People},
		{Method: http.MethodGet, Path: "/review/:id", Handler: s.ReviewPage(), Access: door.People},
		{Method: http.MethodPost, Path: "/review/:id", Handler: s.ReviewSubmit(), Access: door.People},
	}
}

// endpoint adapts a handler that returns an error; the error is written in
// OpenAI's shape in this one place and recorded on the Exchange.
type endpoint func(w http.ResponseWriter, r *http.Request) error

func (e endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	err := e(w, r)
	if err == nil {
		return
	}
	ae := apierror.Write(w, err)
	if ex := scope.Lookup(r.Context()); ex != nil {
		ex.ErrCode, ex.Status = ae.Code, ae.Status
		if ae.Err != nil {
			ex.Err = ae.Err
		}
	}
}

// notFound is the 404 for an unknown request, or another agent's: both
// look the same so that ids of other agents' requests leak nothing.
func notFound(id string) *apierror.Error {
	return &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "not_found", Param: "request_id",
		Message: "No approval request " + quoteID(id) + " exists for this caller."}
}

func conflict(msg string) *apierror.Error {
	return &apierror.Error{Status: http.StatusConflict, Type: apierror.TypeInvalidRequest, Code: "conflict", Message: msg}
}

// quoteID shows an id in a message without letting a hostile one through
// unbounded.
func quoteID(id string) string {
	if len(id) > 80 {
		id = id[:80] + "…"
	}
	return "`" + id + "`"
}

// newID returns an unguessable request id: knowing another agent's id must
// not be possible by enumeration.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return "req-" + hex.EncodeToString(b[:])
}

func (s *Service) reviewURL(id string) string { return s.cur().baseURL + "/review/" + id }
