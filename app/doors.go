package app

import (
	"context"
	"time"

	a2adoor "github.com/sacpgw/gateway/a2a"
	"github.com/sacpgw/gateway/admin"
	"github.com/sacpgw/gateway/approval"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/metrics"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/messaging"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/registry"
	"github.com/sacpgw/gateway/upstream"
	"github.com/sacpgw/gateway/usagepage"
	"github.com/sacpgw/gateway/workflow"
)

// doorList is every front door, in the order they are built and reloaded.
// A builder returns nil for a door that is not served: without an audit
// trail (a config check) there is no approval service, and nothing of what
// needs one (withApproval). A new door is one package and one line here.
// The OpenAI door is last: a reload prepares it last, as it holds the new
// upstream pools.
func (a *App) doorList(ups *upstream.Set) []func(*config.Config) (door.Door, error) {
	return []func(*config.Config) (door.Door, error){
		a.approvalDoor,
		a.registryDoor,
		a.withApproval(a.relayDoor),
		a.withApproval(a.workflowDoor),
		a.mcpDoor,
		a.oauthDoor, // the authorization server for people's MCP clients (oauth.go)
		a.a2aDoor,
		a.reviewDoor, // the review site's queue, sign-out and operator page (ops.go)
		a.withApproval(a.usageDoor),
		a.withApproval(a.adminDoor),
		func(cfg *config.Config) (door.Door, error) { return a.openAIDoor(cfg, ups) },
	}
}

// withApproval is a door served only beside the approval service: build
// runs once approvalDoor has made it, and not at all when it did not.
func (a *App) withApproval(build func(*config.Config) (door.Door, error)) func(*config.Config) (door.Door, error) {
	return func(cfg *config.Config) (door.Door, error) {
		if a.approval == nil {
			return nil, nil
		}
		return build(cfg)
	}
}

// approvalDoor is the approval protocol's service (docs/approval.md), the
// door every other asks for human reviews. Its RBAC model and catalogue
// are checked even when it is not served.
func (a *App) approvalDoor(cfg *config.Config) (door.Door, error) {
	rbac, err := policy.RBACFor(cfg.Dir, cfg.Agents, cfg.Gateway.Admin.ReviewerNames())
	if err != nil {
		return nil, &UsageError{err.Error()}
	}
	catalogue, err := approval.CatalogueFor(cfg)
	if err != nil {
		return nil, &UsageError{err.Error()}
	}
	if a.audit == nil {
		return nil, nil
	}
	svc, err := approval.New(approval.Deps{
		Config: cfg, Decider: a.policies, Authorizer: rbac, Store: a.state.store,
		Limiter: a.state.limiter, Rate: limit.Rule{N: cfg.Gateway.Approval.RateLimit.N, Period: cfg.Gateway.Approval.RateLimit.Period},
		Audit: a.rec, Catalogue: catalogue,
		BaseURL: cfg.Gateway.Approval.BaseURL, Webhook: cfg.Gateway.Approval.Webhook, Log: a.log,
		HTTPClient: a.egress.Client(5 * time.Second), Metrics: a.metrics,
	})
	if err != nil {
		return nil, err
	}
	a.approval = svc
	return svc, nil
}

// adminDoor is the admin API and console (docs/admin-api.md): run-time
// agents, their keys and teams, for the people approval signs in.
func (a *App) adminDoor(cfg *config.Config) (door.Door, error) {
	return admin.New(cfg, admin.Deps{Store: a.state.admin, Keys: a.keys, People: a.approval, Audit: a.rec, Log: a.log})
}

// registryDoor is the registry's API (/registry/*, /sacp/validate). Not
// served, the registry still takes every reload: the OpenAI door reads
// its library and spawned agents.
func (a *App) registryDoor(*config.Config) (door.Door, error) {
	if a.approval == nil {
		return unserved{a.registry}, nil
	}
	api := &registry.API{Registry: a.registry, Policy: a.policies, Audit: a.rec, Escalator: a.approval, People: a.approval,
		Log: a.log, Egress: a.egress}
	a.approval.Handle(approval.TypeSpawn, api.Resolve)
	return api, nil
}

// relayDoor is agent messaging (docs/agent-messaging.md), with its metrics.
func (a *App) relayDoor(cfg *config.Config) (door.Door, error) {
	client, err := messaging.NewClient(cfg.Gateway.Messaging.TLS, a.egress)
	if err != nil {
		return nil, &UsageError{err.Error()}
	}
	rbac, err := policy.RBACFor(cfg.Dir, cfg.Agents, cfg.Gateway.Admin.ReviewerNames())
	if err != nil {
		return nil, &UsageError{err.Error()}
	}
	svc, err := messaging.New(messaging.Deps{
		Config: cfg, Registry: a.registry, RBAC: rbac, Policy: a.policies, Queue: a.state.queue, History: a.state.history,
		Audit: a.rec, Escalator: a.approval, People: a.approval, Log: a.log, Client: client, Contexts: a.relayContexts(cfg),
	})
	if err != nil {
		return nil, err
	}
	a.messaging = svc
	a.approval.Handle(approval.TypeMessage, svc.Resolve)
	messagingMetrics(a.metrics, svc)
	return svc, nil
}

// workflowDoor is the workflow engine (docs/workflows.md): each step is a
// call through the gateway's own handler, as its node's agent.
func (a *App) workflowDoor(cfg *config.Config) (door.Door, error) {
	eng, err := workflow.New(workflow.Deps{
		Definitions: cfg.Workflows, Store: a.state.runs, Caller: stepCaller{handler: a.Handler, endpoint: a.hasEndpoint, a2a: a.servesA2A}, Policy: a.policies, Steps: a.state.limiter,
		Picker:    registryPicker{handler: a.Handler, registry: a.registry, relay: func() *messaging.Service { return a.messaging }},
		Escalator: a.approval, Audit: a.rec, Log: a.log, Owner: cfg.Gateway.Audit.Chain,
		PolicyTimeout: cfg.Protocol.Timeouts.Validation.D(),
		Blobs:         a.state.blobs, MaxInlineBinary: int(cfg.Protocol.Limits.MaxInlineBinary),
	})
	if err != nil {
		return nil, err
	}
	a.workflows = eng
	a.approval.Handle(approval.TypeWorkflow, eng.Resolve)
	return &workflow.API{Engine: eng}, nil
}

// a2aDoor is the A2A front door (docs/a2a.md): the agents that declare
// a2a.url, reached through the outbound guard, their cards' skills in the
// registry, their questions (a2a.human_input) on the approval service.
func (a *App) a2aDoor(cfg *config.Config) (door.Door, error) {
	deps := a2adoor.Deps{Config: cfg, Policy: a.policies, Client: a.egress.Client(0), Log: a.log,
		Audit: a.rec, Skills: registrySkills{a.registry}}
	if a.approval != nil {
		deps.Opener = a.approval
	}
	if a.state.blobs != nil {
		deps.Blobs = a2aBlobs{a.state.blobs}
	}
	d, err := a2adoor.New(deps)
	if err != nil {
		return nil, err
	}
	if a.approval != nil {
		a.approval.Handle(approval.TypeA2AInput, d.Resolve)
	}
	a.a2a = d
	return d, nil
}

// registrySkills lists the A2A cards' skills in the registry.
type registrySkills struct{ r *registry.Registry }

func (s registrySkills) SetSkills(agent string, skills []a2adoor.Skill) {
	out := make([]registry.Skill, len(skills))
	for i, sk := range skills {
		out[i] = registry.Skill{ID: sk.ID, Name: sk.Name, Description: sk.Description, Tags: sk.Tags}
	}
	s.r.SetSkills(agent, out)
}

// a2aBlobs keeps the A2A door's large files in the workflows' blob store
// (GET /blobs/{sha256}).
type a2aBlobs struct{ s workflow.BlobStore }

func (b a2aBlobs) Put(ctx context.Context, sha, mediaType string, data []byte, readers []string) error {
	return b.s.Put(ctx, workflow.Blob{SHA256: sha, MediaType: mediaType, Data: data, Agents: readers})
}

// openAIDoor is the OpenAI-compatible API and its dialects, on ups; the
// limits, audit trail and policies are the app's own, shared across
// reloads.
func (a *App) openAIDoor(cfg *config.Config, ups *upstream.Set) (door.Door, error) {
	d, err := proxy.NewDoor(proxy.Deps{
		Config:       cfg,
		Upstreams:    ups,
		Requests:     a.state.limiter,
		Tokens:       a.state.budget,
		Log:          a.log,
		SidecarAgent: a.sidecar,
		KeepAlive:    a.keepAlive,
		Audit:        a.rec,
		Policies:     a.policies,
		Library:      a.registry,
		Spawned:      a.registry,
		Keys:         a.keys,
		Teams:        a.keys,
		Spend:        a.spend,
		Responses:    a.state.responses,
		Usage:        a.usage,
	}, a.upstreamStats)
	if err != nil {
		return nil, err
	}
	a.openai = d
	return d, nil
}

// usageDoor is the usage page (/review/usage), for the people the
// approval service signs in.
func (a *App) usageDoor(cfg *config.Config) (door.Door, error) {
	return usagepage.New(cfg, a.approval, a.usage, a.log), nil
}

// unserved is a part that takes reloads but serves no routes.
type unserved struct{ Reconfigurer }

func (unserved) Routes() []door.Route { return nil }

// pages is a door of routes alone, with nothing to reload.
type pages []door.Route

func (p pages) Routes() []door.Route                 { return p }
func (pages) Prepare(*config.Config) (func(), error) { return func() {}, nil }

// messagingMetrics counts the relay's envelopes and its queue.
func messagingMetrics(m *metrics.Metrics, svc *messaging.Service) {
	for _, c := range []struct {
		name, help string
		f          func(messaging.Stats) int64
	}{
		{"gateway_messages_accepted_total", "Agent-to-agent envelopes accepted.", func(s messaging.Stats) int64 { return s.Accepted }},
		{"gateway_messages_refused_total", "Agent-to-agent envelopes refused (invalid, spoofed, denied, too large...).", func(s messaging.Stats) int64 { return s.Refused }},
		{"gateway_messages_delivered_total", "Messages handed to their recipient.", func(s messaging.Stats) int64 { return s.Delivered }},
		{"gateway_messages_failed_total", "Messages not delivered after every attempt.", func(s messaging.Stats) int64 { return s.Failed }},
		{"gateway_messages_escalated_total", "Escalations opened for agent-to-agent errors and failed deliveries.", func(s messaging.Stats) int64 { return s.Escalated }},
		{"gateway_messages_expired_total", "Queued messages not delivered because their metadata.ttl_ms passed first.", func(s messaging.Stats) int64 { return s.Expired }},
	} {
		m.Counter(c.name, c.help, func() float64 { return float64(c.f(svc.Stats())) })
	}
	m.Gauge("gateway_messages_queued", "Queued deliveries, waiting or in flight.", func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		n, err := svc.QueueLen(ctx)
		if err != nil {
			return -1
		}
		return float64(n)
	})
}
