package proxy

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/upstream"
)

// Door is the OpenAI front door (with the Anthropic, Responses and Azure
// dialects) as the shell mounts it: its routes read the current Gateway
// on every request, so a config reload takes effect for the next request
// while requests in flight finish on the chains they started with. It
// owns the upstream pools of the configuration it serves.
type Door struct {
	deps  Deps // as given to NewDoor; Prepare replaces Config and Upstreams
	stats *upstream.Stats
	cur   atomic.Pointer[Gateway]
	mu    sync.Mutex // guards ups across reloads
	ups   *upstream.Set
}

var _ door.Door = (*Door)(nil)

// NewDoor compiles the chains of d (see New) and serves them; d.Upstreams
// is the door's to close. stats, when set, counts the upstreams' failovers
// and breakers across reloads.
func NewDoor(d Deps, stats *upstream.Stats) (*Door, error) {
	g, err := New(d)
	if err != nil {
		return nil, err
	}
	o := &Door{deps: d, stats: stats, ups: d.Upstreams}
	o.cur.Store(g)
	return o, nil
}

// Prepare builds new upstream pools and chains for cfg; apply serves them
// and closes the old pools a minute later (requests in flight keep them
// until they finish).
func (o *Door) Prepare(cfg *config.Config) (apply func(), err error) {
	var opts []upstream.Option
	if o.stats != nil {
		opts = append(opts, upstream.WithStats(o.stats))
	}
	ups, err := upstream.New(cfg.Gateway.Upstreams, o.deps.Log, opts...)
	if err != nil {
		return nil, err
	}
	d := o.deps
	d.Config, d.Upstreams = cfg, ups
	g, err := New(d)
	if err != nil {
		ups.Close()
		return nil, err
	}
	return func() {
		o.mu.Lock()
		old := o.ups
		o.ups = ups
		o.mu.Unlock()
		o.cur.Store(g)
		time.AfterFunc(time.Minute, old.Close)
	}, nil
}

// OpenBreakers is the number of upstreams whose circuit breaker is open or
// half-open now.
func (o *Door) OpenBreakers() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ups.OpenBreakers()
}

// Close closes the current upstream pools.
func (o *Door) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ups.Close()
}

// Routes are the OpenAI API's paths, Anthropic's Messages API's, and
// Azure OpenAI's deployments and v1 routes. Each chain identifies and
// meters its caller itself, inside the exchange's journal.
func (o *Door) Routes() []door.Route {
	route := func(method, path string, h func(*Gateway) http.Handler) door.Route {
		return door.Route{Method: method, Path: path, Access: door.Chained, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h(o.cur.Load()).ServeHTTP(w, r)
		})}
	}
	return []door.Route{
		route(http.MethodPost, "/v1/chat/completions", (*Gateway).ChatCompletions),
		route(http.MethodPost, "/v1/embeddings", (*Gateway).Embeddings),
		route(http.MethodPost, "/v1/messages", (*Gateway).Messages),
		route(http.MethodPost, "/v1/messages/count_tokens", (*Gateway).CountTokens),
		// Anthropic's clients read Anthropic's error shape on its API's paths.
		route(door.AnyMethod, "/v1/messages/*", (*Gateway).MessagesNotFound),
		route(http.MethodPost, "/v1/responses", (*Gateway).Responses),
		route(http.MethodGet, "/v1/models", (*Gateway).Models),
		route(http.MethodGet, "/v1/models/*", (*Gateway).Model),
		// Azure OpenAI clients (azure.go): the deployments routes, and
		// Azure's v1 API, on the chains above.
		route(http.MethodPost, "/openai/deployments/:deployment/chat/completions", (*Gateway).AzureChatCompletions),
		route(http.MethodPost, "/openai/deployments/:deployment/embeddings", (*Gateway).AzureEmbeddings),
		route(http.MethodPost, "/openai/v1/chat/completions", (*Gateway).AzureV1ChatCompletions),
		route(http.MethodPost, "/openai/v1/embeddings", (*Gateway).AzureV1Embeddings),
		route(http.MethodGet, "/openai/v1/models", (*Gateway).Models),
		route(http.MethodGet, "/openai/v1/models/*", (*Gateway).Model),
	}
}
