// Package a2a is the gateway's front door for the Agent2Agent protocol
// (A2A 1.0, JSON-RPC binding): an agent of agents.yaml that declares
// a2a.url is served at /a2a/{agent}, so that A2A clients reach it through
// the gateway and under its governance (docs/a2a.md).
//
// The gateway reads the agent's Agent Card through the outbound guard,
// bounded and strictly, checks it, lists its skills in the registry, and
// serves it rewritten: the only interface is the gateway's own URL, the
// only security scheme the gateway's bearer token. Every call is read
// once and strictly (a method of another protocol version is refused by
// name), the caller is the identified agent, and a message is decided
// like a relay message: the caller's messages rules (the action is the
// skill) and data.gateway.messages with dialect "a2a", its skill and the
// kinds of its parts. Text and data parts, file names and metadata are
// redacted both ways, streams included; every call and every answer or
// event is an audited message.* entry with its task and context ids. A
// task is its caller's: another agent asking for it is told there is no
// such task. Push notifications are refused by name: the gateway does not
// let an agent make it call an address.
//
// The package imports the plumbing (internal/door, internal/scope,
// internal/httpx, internal/strictjson) and the governance parts (policy,
// redact, audit, config); no other front door.
package a2a

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/redact"
)

// Audit entry kinds of the door (the relay's names, dialect "a2a").
const (
	// KindRequest is a call a caller made (a message, a read, a cancel).
	KindRequest = "message.request"
	// KindResponse is the agent's answer, or one event of a stream.
	KindResponse = "message.response"
	// KindReject is a call refused before it reached the agent.
	KindReject = "message.reject"
	// KindCard is an agent's card read for the first time, or changed.
	KindCard = "a2a.card"
)

// Authorizer is RBAC for messages (policy.RBAC).
type Authorizer interface {
	AuthorizeMessage(sender, recipient, action string) policy.Authz
}

// Decider is the Rego hook data.gateway.messages.deny (policy.Engine).
type Decider interface {
	MessagesDeny(ctx context.Context, input map[string]any) (policy.ChatDecision, error)
}

// Skill is one skill of a card, as the registry lists it.
type Skill struct {
	ID, Name, Description string
	Tags                  []string
}

// SkillSink takes the skills of each card read (the registry).
type SkillSink interface {
	SetSkills(agent string, skills []Skill)
}

// Deps are what a Door needs. Config, Policy, Client and Log are required.
type Deps struct {
	Config *config.Config
	Policy Decider
	// Client reaches the agents: through the outbound guard, following no
	// redirect.
	Client *http.Client
	Log    *slog.Logger
	// Audit writes the door's entries; nil writes nothing.
	Audit *door.Recorder
	// Skills, when set, lists the cards' skills in the registry.
	Skills SkillSink
	// Blobs, when set, takes the bytes of file parts larger than protocol
	// limits.max_inline_binary.
	Blobs BlobStore
	// Opener opens the reviews of the questions of agents with
	// a2a.human_input (the approval service); nil: every question goes
	// to the caller.
	Opener escalation.Opener
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// Door serves /a2a/{agent}. It is safe for concurrent use; Prepare swaps
// in a new configuration for the next request.
type Door struct {
	conf    atomic.Pointer[conf]
	policy  Decider
	client  *http.Client
	log     *slog.Logger
	audit   *door.Recorder
	skills  SkillSink
	now     func() time.Time
	cards   *cards
	owners  *owners
	waiting *waiting
	opener  escalation.Opener
	blobs   BlobStore
	rpc     http.Handler
}

// conf is one configuration of the door, immutable once built.
type conf struct {
	agents map[string]*roster.Agent
	// agentIn is each agent's policy input, converted once.
	agentIn map[string]any
	rbac    Authorizer
	// red redacts parts and metadata (protocol.redaction with messages:
	// true, as for the relay); nil: off.
	red *redact.Redactor
	// timeout bounds one call to an agent (protocol timeouts.response).
	timeout time.Duration
	// baseURL is the gateway's external URL (approval.base_url); empty:
	// the card names the host the caller asked.
	baseURL string
	// maxInline is protocol limits.max_inline_binary: file bytes larger
	// become blob references.
	maxInline int
}

// New builds the door for d.Config.
func New(d Deps) (*Door, error) {
	if d.Config == nil || d.Policy == nil || d.Client == nil || d.Log == nil {
		return nil, errors.New("a2a: Config, Policy, Client and Log are required")
	}
	dr := &Door{policy: d.Policy, client: boundedClient(d.Client), log: d.Log, audit: d.Audit, skills: d.Skills, now: d.Now, owners: newOwners(),
		waiting: &waiting{by: map[string]string{}}, opener: d.Opener, blobs: d.Blobs}
	if dr.now == nil {
		dr.now = time.Now
	}
	dr.cards = &cards{d: dr, byAgent: map[string]*cardState{}}
	dr.rpc = a2asrv.NewJSONRPCHandler(&handler{d: dr})
	if err := door.Configure(dr, d.Config); err != nil {
		return nil, err
	}
	return dr, nil
}

// Prepare builds the door's configuration for cfg (the A2A agents, RBAC,
// redaction) and returns apply, which serves it from the next request
// on. A card read for an agent whose URL did not change is kept.
func (d *Door) Prepare(cfg *config.Config) (apply func(), err error) {
	rbac, err := policy.RBACFor(cfg.Dir, cfg.Agents, cfg.Gateway.Admin.ReviewerNames())
	if err != nil {
		return nil, fmt.Errorf("a2a: %w", err)
	}
	c := &conf{agents: cfg.Agents, agentIn: make(map[string]any, len(cfg.Agents)), rbac: rbac,
		timeout: cfg.Protocol.Timeouts.Response.D(), baseURL: cfg.Gateway.Approval.BaseURL,
		maxInline: int(cfg.Protocol.Limits.MaxInlineBinary)}
	if c.timeout <= 0 {
		c.timeout = 60 * time.Second
	}
	for id, a := range cfg.Agents {
		c.agentIn[id] = policy.Preconvert(policy.AgentInput(a))
	}
	if rc := cfg.Protocol.Redaction; rc.Messages && len(rc.Detectors) > 0 {
		if c.red, err = redact.New(redact.Config{Detectors: rc.Detectors, Replacement: rc.Replacement, Block: rc.Block}); err != nil {
			return nil, fmt.Errorf("a2a: redaction: %w", err)
		}
	}
	return func() {
		d.conf.Store(c)
		d.cards.keep(c.agents)
	}, nil
}

// Routes are the card (GET) and the JSON-RPC binding (POST), both behind
// the identify stage; a call spends one request of the caller's
// rate_limit.
func (d *Door) Routes() []door.Route {
	return []door.Route{
		{Method: http.MethodGet, Path: "/a2a/:agent/.well-known/agent-card.json", Handler: http.HandlerFunc(d.serveCard), Access: door.Agent},
		{Method: http.MethodPost, Path: "/a2a/:agent", Handler: http.HandlerFunc(d.serveRPC), Access: door.Metered},
	}
}

// Serves reports whether agent is an A2A agent of the configuration
// served now: a workflow step of it is a message through this door.
func (d *Door) Serves(agent string) bool {
	a := d.conf.Load().agents[agent]
	return a != nil && a.A2A != nil
}

// target is the A2A agent a request names, or nil.
func (c *conf) target(r *http.Request) *roster.Agent {
	a := c.agents[r.PathValue("agent")]
	if a == nil || a.A2A == nil {
		return nil
	}
	return a
}

// Run reads every A2A agent's card at start and then every cardTTL, so
// that a change is seen (audited, its skills listed) without a call,
// until ctx ends.
func (d *Door) Run(ctx context.Context) {
	for ctx.Err() == nil {
		d.Refresh(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(cardTTL):
		}
	}
}

// Refresh reads every A2A agent's card now (a change is audited and its
// skills listed); a card that cannot be read is logged and left as it was.
func (d *Door) Refresh(ctx context.Context) {
	c := d.conf.Load()
	for _, id := range roster.IDs(c.agents) {
		a := c.agents[id]
		if a.A2A == nil {
			continue
		}
		if _, err := d.cards.fetch(ctx, a); err != nil {
			d.log.Warn("a2a: agent card not read", "agent", id, "err", err)
		}
	}
}

var (
	_ door.Door             = (*Door)(nil)
	_ a2asrv.RequestHandler = (*handler)(nil)
)
