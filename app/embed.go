package app

import (
	"context"
	"fmt"
	"net/http"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/registry"
)

// embedder makes the registry's embeddings calls through the gateway's own
// handler, in process (scope.Acting): identified, limited, checked and
// audited like an agent's own /v1/embeddings request. The query text is
// embedded as the agent that queries; every candidate's profile as the
// gateway itself (registry.ProfileCaller), under registry.embeddings'
// own limits.
type embedder struct {
	handler func() http.Handler
	// model is the current registry.embeddings model (it changes on reload).
	model func() string
	// self is the gateway's own identity for the profiles' embeddings
	// (registry.ProfileCaller), nil when registry.embeddings is unset.
	self func() *roster.Agent
}

// Embed returns one vector per text.
func (e embedder) Embed(ctx context.Context, agentID string, texts []string) ([][]float64, error) {
	acting := scope.Acting{AgentID: agentID}
	if agentID == registry.ProfileCaller {
		if acting.Self = e.self(); acting.Self == nil {
			return nil, fmt.Errorf("embeddings: registry.embeddings is not set")
		}
	}
	rec, err := callInProcess(ctx, e.handler(), acting, "/v1/embeddings", nil,
		map[string]any{"model": e.model(), "input": texts})
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	var resp struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := jsonv2.Unmarshal(rec.body.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("embeddings answer: %w", err)
	}
	out := make([][]float64, len(texts))
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("embeddings answer: index %d out of place", d.Index)
		}
		out[d.Index] = d.Embedding
	}
	for i, v := range out {
		if len(v) == 0 {
			return nil, fmt.Errorf("embeddings answer: no vector for input %d", i)
		}
	}
	return out, nil
}

// embeddingsModel is the model of registry.embeddings ("" when unset: the
// registry then ranks text lexically and never calls the embedder).
func embeddingsModel(cfg *config.Config) *string {
	m := ""
	if e := cfg.Registry.Embeddings; e != nil {
		m = e.Model
	}
	return &m
}

// embeddingsSelf is the identity the gateway embeds agents' profiles as:
// allowed the embeddings model and nothing else, under
// registry.embeddings' own limits. Nil without registry.embeddings.
func embeddingsSelf(cfg *config.Config) *roster.Agent {
	e := cfg.Registry.Embeddings
	if e == nil {
		return nil
	}
	rate, tokens := e.RateLimit, e.TokenLimit
	if rate.N == 0 {
		rate = config.Rate{N: 600, Period: time.Minute}
	}
	if tokens.N == 0 {
		tokens = config.Rate{N: 2_000_000, Period: time.Hour}
	}
	return &roster.Agent{ID: registry.ProfileCaller, Type: "gateway", Models: []string{e.Model},
		RateLimit: rate, TokenLimit: tokens, MaxRequestSize: 1 << 20}
}
