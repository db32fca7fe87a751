// Package messaging governs agent-to-agent traffic (docs/agent-messaging.md):
// ACL and SAM envelopes (docs/glossary.md) posted to /relay/messages by
// authenticated agents are validated field by field, checked against the
// sender's identity and registered type, RBAC and the Rego hook
// data.gateway.messages.deny, their compact SACP plan (if any) against the
// registry's library and the recipient's verbs and tools, audited with
// their payload hash, recorded in an append-only history (which refuses a
// repeated message_id atomically), and relayed: a REQUEST synchronously to
// the recipient's endpoint (its RESPONSE comes back within
// metadata.timeout_ms), anything else through a queue that hands it over in
// priority order with retries (a broadcast to every agent that receives
// messages, a group send to every agent of a type, one delivery each). An
// ERROR that is fatal, not retryable, or repeated max_retry_attempts times,
// and a delivery that keeps failing, open an escalation on the approval
// protocol's human review (the error propagation and human in the loop of
// the agent communication patterns); the reviewer's decision comes back as
// a RESPONSE. A message that says WAITING_FOR_HUMAN suspends its thread
// until a person decides.
package messaging

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/messaging/relayconf"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/mailbox"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/registry"
)

// Route is where the relay is mounted: POST sends an envelope (Send), GET
// reads a thread (History). Not /v1/messages: that is the Anthropic
// Messages API's path, which a gateway in front of models must leave to it.
const Route = "/relay/messages"

// Audit entry kinds of agent-to-agent traffic.
const (
	// KindMessage: an envelope accepted from an agent (or injected by the
	// gateway or a reviewer), before it is relayed.
	KindMessage = "message.request"
	// KindMessageResponse: the answer a recipient gave to a REQUEST.
	KindMessageResponse = "message.response"
	// KindMessageDelivery: the outcome of handing a queued message over.
	KindMessageDelivery = "message.delivery"
	// KindMessageReject: an envelope refused (invalid, spoofed, denied...).
	KindMessageReject = "message.reject"
)

// GatewayID is the sender of the ERROR envelopes the gateway itself writes.
const GatewayID = "gateway"

// HumanID is the sender of the RESPONSE that carries a reviewer's decision.
const HumanID = "human"

// Authorizer is RBAC for messages (policy.RBAC).
type Authorizer interface {
	AuthorizeMessage(sender, recipient, action string) policy.Authz
}

// Decider is the Rego hook (policy.Engine).
type Decider interface {
	MessagesDeny(ctx context.Context, input map[string]any) (policy.ChatDecision, error)
}

// Escalator opens a human review (approval.Service).
type Escalator interface {
	Open(ctx context.Context, req escalation.Request) (escalation.Opened, error)
}

// Deps are the service's dependencies; all but Client and Now are required.
type Deps struct {
	Config    *config.Config
	Registry  *registry.Registry
	RBAC      Authorizer
	Policy    Decider
	Queue     mailbox.Queue
	History   mailbox.History
	Audit     *door.Recorder
	Escalator Escalator
	// People authenticates the admin and reviewers of GET /admin/messages.
	People People
	Log    *slog.Logger
	// Client calls recipients' endpoints. Nil: a client with no timeout of
	// its own (each call carries its deadline).
	Client *http.Client
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
	// Contexts keeps the threads' Global Contexts. Nil: in memory.
	Contexts ContextStore
}

// Service relays and governs agent-to-agent messages.
type Service struct {
	reg       *registry.Registry
	policy    Decider
	queue     mailbox.Queue
	history   mailbox.History
	audit     *door.Recorder
	escalator Escalator
	people    People
	log       *slog.Logger
	client    *http.Client
	now       func() time.Time
	contexts  ContextStore

	// conf is what a config reload replaces; each request reads it once.
	conf atomic.Pointer[conf]

	stats counters
}

// conf is the configuration-dependent part of the service.
type conf struct {
	cfg  *config.Config
	rbac Authorizer
	// attempts bounds delivery attempts and repeated ERRORs
	// (protocol limits.max_retry_attempts, at least 1).
	attempts int
	// agentIn is each configured agent's policy input, converted once.
	agentIn map[string]any
	// red redacts envelopes (protocol.redaction.messages); nil: off.
	red *redact.Redactor
}

func newConf(cfg *config.Config, rbac Authorizer) (*conf, error) {
	c := &conf{cfg: cfg, rbac: rbac, attempts: max(1, cfg.Protocol.Limits.MaxRetryAttempts), agentIn: make(map[string]any, len(cfg.Agents))}
	for id, a := range cfg.Agents {
		c.agentIn[id] = policy.Preconvert(policy.AgentInput(a))
	}
	if rc := cfg.Protocol.Redaction; rc.Messages && len(rc.Detectors) > 0 {
		red, err := redact.New(redact.Config{Detectors: rc.Detectors, Replacement: rc.Replacement, Block: rc.Block})
		if err != nil {
			return nil, fmt.Errorf("messaging: redaction: %w", err)
		}
		c.red = red
	}
	return c, nil
}

// Prepare builds the service's configuration for cfg (agents, RBAC,
// redaction) and returns apply, which serves it from the next message on;
// messages in flight finish under the configuration they began with. The
// worker count and the queue are not changed. Nothing changes unless
// apply is called.
func (s *Service) Prepare(cfg *config.Config) (apply func(), err error) {
	rbac, err := policy.RBACFor(cfg.Dir, cfg.Agents, cfg.Gateway.Admin.ReviewerNames())
	if err != nil {
		return nil, err
	}
	c, err := newConf(cfg, rbac)
	if err != nil {
		return nil, err
	}
	return func() { s.conf.Store(c) }, nil
}

// counters are the service's totals for /metrics.
type counters struct {
	accepted, refused, delivered, failed, escalated, expired atomic.Int64
}

// Stats are the service's totals since start.
type Stats struct {
	// Accepted and Refused count envelopes posted by agents.
	Accepted, Refused int64
	// Delivered and Failed count hand-overs (a REQUEST's relay, or a
	// queued message after all its attempts).
	Delivered, Failed int64
	// Escalated counts escalations opened.
	Escalated int64
	// Expired counts queued deliveries dropped because their
	// metadata.ttl_ms passed before a worker got to them.
	Expired int64
}

// Stats returns the totals.
func (s *Service) Stats() Stats {
	return Stats{Accepted: s.stats.accepted.Load(), Refused: s.stats.refused.Load(), Delivered: s.stats.delivered.Load(),
		Failed: s.stats.failed.Load(), Escalated: s.stats.escalated.Load(), Expired: s.stats.expired.Load()}
}

// QueueLen is the number of queued deliveries (waiting or in flight).
func (s *Service) QueueLen(ctx context.Context) (int64, error) { return s.queue.Len(ctx) }

// New checks d and builds the service.
func New(d Deps) (*Service, error) {
	if d.Config == nil || d.Registry == nil || d.RBAC == nil || d.Policy == nil || d.Queue == nil ||
		d.History == nil || d.Audit == nil || d.Escalator == nil || d.Log == nil {
		return nil, errors.New("messaging: Config, Registry, RBAC, Policy, Queue, History, Audit, Escalator and Log are required")
	}
	s := &Service{
		reg: d.Registry, policy: d.Policy, queue: d.Queue, history: d.History,
		audit: d.Audit, escalator: d.Escalator, people: d.People, log: d.Log, client: d.Client, now: d.Now, contexts: d.Contexts,
	}
	if s.contexts == nil {
		s.contexts = NewMemoryContexts()
	}
	c, err := newConf(d.Config, d.RBAC)
	if err != nil {
		return nil, err
	}
	s.conf.Store(c)
	if s.client == nil {
		// Public addresses only, no redirects (NewClient cannot fail
		// without certificate files).
		s.client, _ = NewClient(relayconf.TLS{}, egress.Policy{})
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// newID is the id of a message the gateway writes or whose sender gave
// none: a UUIDv4, which nobody can guess or collide with. Ids agents chose
// are kept as they are.
func newID() string { return mailbox.NewID() }

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// timeout is how long a REQUEST may take: metadata.timeout_ms capped by
// messaging.max_timeout, or messaging.timeout.
func (s *Service) timeout(ms int) time.Duration {
	m := s.conf.Load().cfg.Gateway.Messaging
	if ms <= 0 {
		return m.Timeout.D()
	}
	return min(time.Duration(ms)*time.Millisecond, m.MaxTimeout.D())
}

// errorf wraps an internal failure with context.
func errorf(format string, args ...any) error { return fmt.Errorf("messaging: "+format, args...) }

// Routes are the relay's endpoints: sending spends one request of the
// sender's rate_limit; an agent reads its own history; the admin and
// reviewers read everyone's (People).
func (s *Service) Routes() []door.Route {
	return []door.Route{
		{Method: http.MethodPost, Path: "/relay/messages", Handler: http.HandlerFunc(s.Send), Access: door.Metered},
		{Method: http.MethodGet, Path: "/relay/messages", Handler: http.HandlerFunc(s.History), Access: door.Agent},
		{Method: http.MethodGet, Path: "/relay/context", Handler: http.HandlerFunc(s.Context), Access: door.Agent},
		{Method: http.MethodGet, Path: "/admin/messages", Handler: s.AdminHistory(s.people), Access: door.People},
	}
}

var _ door.Door = (*Service)(nil)
