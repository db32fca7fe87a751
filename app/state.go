package app

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/admin"
	"github.com/sacpgw/gateway/approval"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/ledger"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/mailbox"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/registry"
	"github.com/sacpgw/gateway/workflow"
)

// state is where limits and approval states live: this process (memory),
// or Redis shared by every replica, with the configured fallback.
type state struct {
	limiter  limit.Limiter
	budget   limit.Budget
	store    approval.Store
	fallback *limit.Fallback
	redis    redis.UniversalClient
	// Agent-to-agent traffic: the delivery queue, the message history and
	// the agents registered at run time.
	queue   mailbox.Queue
	history mailbox.History
	spawned registry.Store
	// runs are the workflow runs; blobs the binary values moved out of
	// their answers.
	runs  workflow.Store
	blobs workflow.BlobStore
	// responses are the Responses API's kept conversations (responses_state.go).
	responses *proxy.ResponseState
	// usage is the usage per day (a file of state.dir, or Redis hashes).
	usage ledger.Store
	// admin holds the agents, keys and teams of the admin API.
	admin *admin.Store
}

func newState(cfg *config.Config, log *slog.Logger) (*state, error) {
	msg := cfg.Gateway.Messaging
	hist := mailbox.HistoryOptions{Retention: msg.HistoryRetention.D(), Timeout: cfg.Gateway.State.Timeout.D()}
	// A delivery left unacknowledged (its worker could not record it, or
	// the replica died) is handed out again only after it could have
	// finished all its attempts.
	attempts := time.Duration(max(1, cfg.Protocol.Limits.MaxRetryAttempts))
	claimIdle := max(time.Minute, 2*attempts*(msg.Timeout.D()+msg.RetryBackoff.D()))
	if cfg.Gateway.State.Backend != "redis" {
		// The agents spawned at run time outlive a restart: they are in a
		// file of state.dir.
		spawned, err := registry.NewFileStore(cfg.Gateway.State.Dir)
		if err != nil {
			return nil, fmt.Errorf("state.dir: %w", err)
		}
		usage, err := ledger.NewFileStore(cfg.Gateway.State.Dir)
		if err != nil {
			return nil, fmt.Errorf("state.dir: %w", err)
		}
		adm, err := admin.NewMemoryStore(cfg.Gateway.State.Dir)
		if err != nil {
			return nil, fmt.Errorf("state.dir: %w", err)
		}
		return &state{limiter: limit.NewMemory(), budget: limit.NewMemoryBudget(), store: approval.NewMemoryStore(), usage: usage,
			queue:   mailbox.NewMemoryQueueWithOptions(mailbox.MemoryQueueOptions{Capacity: msg.QueueCapacity, ClaimIdle: claimIdle}),
			history: mailbox.NewMemoryHistory(hist), spawned: spawned, runs: workflow.NewMemoryStore(),
			blobs: workflow.NewMemoryBlobStore(0), admin: adm}, nil
	}
	client, err := limit.NewStateClient(cfg.Gateway.State.RedisSettings(), cfg.Gateway.State.Timeout.D())
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	fb := &limit.Fallback{
		Primary: limit.NewRedis(client), Local: limit.NewMemory(),
		PrimaryBudget: limit.NewRedisBudget(client), LocalBudget: limit.NewMemoryBudget(),
		OnFailure: cfg.Gateway.State.OnFailure, Log: log,
	}
	// The consumer name must be unique per replica: the audit chain id is
	// (the chart sets it to the pod name).
	queue, err := mailbox.NewRedisQueue(client, mailbox.RedisQueueOptions{Consumer: cfg.Gateway.Audit.Chain, MaxLen: int64(msg.QueueCapacity), ClaimIdle: claimIdle,
		Timeout: cfg.Gateway.State.Timeout.D()})
	if err != nil {
		log.Warn("message queue: Redis not ready at startup; the queue retries on use", "error", err.Error())
	}
	return &state{limiter: fb, budget: fb, store: approval.NewRedisStore(client), fallback: fb, redis: client, usage: ledger.NewRedisStore(client, ""),
		queue: queue, history: mailbox.NewRedisHistory(client, hist), spawned: registry.NewRedisStore(client, ""),
		runs: workflow.NewRedisStore(client, "", cfg.Gateway.State.Timeout.D()), blobs: workflow.NewRedisBlobStore(client, "", cfg.Gateway.State.Timeout.D(), 0),
		admin: admin.NewRedisStore(client, cfg.Gateway.State.Timeout.D())}, nil
}
