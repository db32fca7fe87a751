package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/testredis"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/upstream"
	"github.com/sacpgw/gateway/upstream/mock"
)

// mockEmbedder is the gateway's embeddings call in miniature: an OpenAI
// embeddings request through the mock provider's transport (the vectors the
// quickstart gets), answer read back by index. It counts the calls by agent
// and can be made to fail.
type mockEmbedder struct {
	t  *testing.T
	up *upstream.Upstream

	mu    sync.Mutex
	calls []string // "agent: text"
	fail  func(agentID, text string) error
}

func newMockEmbedder(t *testing.T) *mockEmbedder {
	t.Helper()
	set, err := upstream.New([]upstream.Config{{Name: "mock", Type: "mock", Models: []string{"*"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &mockEmbedder{t: t, up: set.Route("mock-embed")}
}

func (m *mockEmbedder) Embed(ctx context.Context, agentID string, texts []string) ([][]float64, error) {
	m.mu.Lock()
	for _, s := range texts {
		m.calls = append(m.calls, agentID+": "+s)
	}
	fail := m.fail
	m.mu.Unlock()
	if fail != nil {
		for _, s := range texts {
			if err := fail(agentID, s); err != nil {
				return nil, err
			}
		}
	}
	body, _ := json.Marshal(map[string]any{"model": "mock-embed", "input": texts})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.up.Target("/v1/embeddings", "").String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := m.up.Transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		return nil, fmt.Errorf("mock embeddings: %d %v", resp.StatusCode, err)
	}
	vecs := make([][]float64, len(texts))
	for _, d := range out.Data {
		vecs[d.Index] = d.Embedding
	}
	return vecs, nil
}

// take returns the calls so far and forgets them.
func (m *mockEmbedder) take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.calls
	m.calls = nil
	slices.Sort(out)
	return out
}

// agentsOf are the agents of calls, sorted.
func agentsOf(calls []string) []string {
	out := []string{}
	for _, c := range calls {
		a, _, _ := strings.Cut(c, ": ")
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

func conf(x float64) *float64 { return &x }

// searchConfig is a small travel-and-software registry with semantic
// selection configured.
func searchConfig() *config.Config {
	return &config.Config{
		Registry: config.Registry{
			Verbs: []config.Verb{
				{Name: "search", Aliases: []string{"s"}, Outputs: "list"}, {Name: "rank", Outputs: "list"}, {Name: "review", Outputs: "report"},
				{Name: "book", Outputs: "booking"}, {Name: "translate", Outputs: "text"}, {Name: "predict", Outputs: "predictions"},
			},
			Tools:      []config.Tool{{ID: "H_API", SupportedVerbs: []string{"search"}}},
			Embeddings: &config.RegistryEmbeddings{Upstream: "mock", Model: "mock-embed"},
		},
		Agents: map[string]*roster.Agent{
			"hotel_search": {Profile: roster.Profile{Description: "Finds hotels in a city within a nightly budget", Tags: []string{"travel", "eu"},
				SupportedVerbs: []string{"search", "rank"}, SupportedTools: []string{"H_API"}, Inputs: []string{"c", "p_max"}, Outputs: []string{"list"}},
				ConfidenceScore: conf(0.9), Version: "2.1.0", AgentLocation: "eu-west-1"},
			"flight_booker":   {Profile: roster.Profile{Description: "Books flights between airports", Tags: []string{"travel"}, SupportedVerbs: []string{"book"}, Inputs: []string{"from", "to"}}},
			"code_reviewer":   {Profile: roster.Profile{Description: "Reviews code changes and pull requests for bugs", Tags: []string{"dev"}, SupportedVerbs: []string{"review"}}},
			"translator":      {Profile: roster.Profile{Description: "Translates documents between languages", Tags: []string{"text"}, SupportedVerbs: []string{"translate"}}},
			"price_predictor": {Profile: roster.Profile{Description: "Predicts prices from historical sales data", SupportedVerbs: []string{"predict"}, Inputs: []string{"history"}}},
		},
	}
}

// lexicalConfig is searchConfig without semantic selection.
func lexicalConfig() *config.Config {
	cfg := searchConfig()
	cfg.Registry.Embeddings = nil
	return cfg
}

func newSearchRegistry(t *testing.T, cfg *config.Config, opts ...Option) *Registry {
	t.Helper()
	r, err := New(cfg, NewMemoryStore(), append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func hitNames(ms []Match) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.AgentName)
	}
	return out
}

// The expected agent comes first, by meaning (the mock's vectors) and by
// words (BM25), for queries that share few words with the descriptions.
func TestSearchRanksByText(t *testing.T) {
	tests := []struct {
		text string
		want string
	}{
		{"find hotels in Paris", "hotel_search"},
		{"review my pull request for bugs", "code_reviewer"},
		{"translate this document to French", "translator"},
		{"book a flight to Rome", "flight_booker"},
		{"predict the price of a house", "price_predictor"},
	}
	emb := newMockEmbedder(t)
	rankings := map[string]*Registry{
		RankSemantic: newSearchRegistry(t, searchConfig(), WithEmbedder(emb)),
		RankLexical:  newSearchRegistry(t, lexicalConfig()),
	}
	for method, r := range rankings {
		for _, tc := range tests {
			t.Run(method+"/"+tc.text, func(t *testing.T) {
				ans, err := r.Search(context.Background(), "orch", Query{Text: tc.text}, 0)
				if err != nil {
					t.Fatal(err)
				}
				if ans.Ranking != method || ans.RankingNote != "" {
					t.Fatalf("ranking %q (%q), want %s", ans.Ranking, ans.RankingNote, method)
				}
				if len(ans.Data) == 0 || ans.Data[0].AgentName != tc.want {
					t.Fatalf("got %v, want %s first", hitNames(ans.Data), tc.want)
				}
				for i, m := range ans.Data {
					p := m.ScoreParts
					if m.Method != method || p == nil || p.Structural != 0 {
						t.Fatalf("hit %s: method %q parts %+v", m.AgentName, m.Method, p)
					}
					// No structural criterion: the score is the text part.
					part := p.Lexical
					if method == RankSemantic {
						part = p.Semantic
					}
					if part == nil || m.Score != *part || m.Score <= 0 || (i > 0 && m.Score > ans.Data[i-1].Score) {
						t.Errorf("hit %s: score %v, parts %+v", m.AgentName, m.Score, p)
					}
				}
				if ans.Suggestion != nil {
					t.Errorf("a suggestion beside hits: %+v", ans.Suggestion)
				}
			})
		}
	}
}

// With structural criteria the score is 0.7 × the text part + 0.3 × the
// structural part, the structural part being today's score over the most
// the query's criteria can give.
func TestSearchBlendsTextAndStructure(t *testing.T) {
	for _, method := range []string{RankSemantic, RankLexical} {
		t.Run(method, func(t *testing.T) {
			var opts []Option
			if method == RankSemantic {
				opts = append(opts, WithEmbedder(newMockEmbedder(t)))
			}
			r := newSearchRegistry(t, searchConfig(), opts...)
			// search: only hotel_search; inputs c, history: hotel_search
			// takes 1/2 (verb), price_predictor is not a searcher.
			ans, err := r.Search(context.Background(), "orch", Query{Text: "cheap hotels in Rome", Verb: "search", Inputs: []string{"c", "history"}}, 0)
			if err != nil || ans.Ranking != method || len(ans.Data) != 1 {
				t.Fatalf("%+v %v", ans, err)
			}
			m := ans.Data[0]
			text := m.ScoreParts.Lexical
			if method == RankSemantic {
				text = m.ScoreParts.Semantic
			}
			wantStruct := round3((0.4 + 0.3*0.5) / 0.7)
			if m.ScoreParts.Structural != wantStruct || text == nil || m.Score != round3(0.7**text+0.3*wantStruct) {
				t.Errorf("score %v parts %+v (text %v), want 0.7×text + 0.3×%v", m.Score, m.ScoreParts, text, wantStruct)
			}
			if !slices.Equal(m.Why, []string{"verb", "inputs 1/2"}) {
				t.Errorf("matched %v", m.Why)
			}
		})
	}
}

// An agent's profile is embedded once per profile text and model: a second
// query embeds only its own text, a changed description (a reload) embeds
// that agent again, under its own identity; a spawned agent's profile is
// embedded as the querying agent.
func TestSearchCachesProfileVectors(t *testing.T) {
	ctx := context.Background()
	emb := newMockEmbedder(t)
	cfg := searchConfig()
	r := newSearchRegistry(t, cfg, WithEmbedder(emb))
	search := func() Answer {
		t.Helper()
		ans, err := r.Search(ctx, "orch", Query{Text: "find hotels"}, 0)
		if err != nil || ans.Ranking != RankSemantic {
			t.Fatalf("%+v %v", ans, err)
		}
		return ans
	}
	search()
	// The query as the agent that asks; every profile as the gateway itself.
	if got, want := agentsOf(emb.take()), []string{ProfileCaller, ProfileCaller, ProfileCaller, ProfileCaller, ProfileCaller, "orch"}; !slices.Equal(got, want) {
		t.Fatalf("first query embedded as %v, want %v", got, want)
	}
	first := search()
	if got := emb.take(); !slices.Equal(got, []string{"orch: find hotels"}) {
		t.Fatalf("second query: calls %v, want the query text only", got)
	}

	cfg.Agents["translator"].Description = "Translates hotel reviews between languages"
	apply, err := r.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	apply()
	search()
	want := []string{ProfileCaller + ": " + ProfileText(mustLookup(t, r, "translator")), "orch: find hotels"}
	if got := emb.take(); !slices.Equal(got, want) {
		t.Fatalf("after a reload: calls %v, want %v", got, want)
	}

	// A changed model is a new key for every agent.
	cfg.Registry.Embeddings = &config.RegistryEmbeddings{Upstream: "mock", Model: "mock-embed-2"}
	apply, _ = r.Prepare(cfg)
	apply()
	search()
	if got := emb.take(); len(got) != 6 {
		t.Fatalf("after a model change: %d calls, want 6: %v", len(got), got)
	}

	lib, _ := r.Library(ctx)
	sp, res := lib.ParseSpawn([]byte(`{"g":"SPAWN_AGENT","plan":[["define","HOSTEL_Q",{"description":"Finds hostels"}],["instantiate","HOSTEL_AGENT",{"tool":"HOSTEL_Q","verb":"search"}]]}`))
	if !res.Valid() {
		t.Fatalf("%+v", res)
	}
	if _, err := r.Spawn(ctx, sp, "agent:orch", ""); err != nil {
		t.Fatal(err)
	}
	search()
	// A spawned agent's profile too is embedded by the gateway itself.
	if got := emb.take(); !slices.Equal(got, []string{ProfileCaller + ": " + ProfileText(mustLookup(t, r, "HOSTEL_AGENT")), "orch: find hotels"}) {
		t.Fatalf("after a spawn: calls %v", got)
	}
	if len(first.Data) == 0 || first.Data[0].AgentName != "hotel_search" {
		t.Errorf("cached vectors rank differently: %v", hitNames(first.Data))
	}
}

func mustLookup(t *testing.T, r *Registry, name string) Entry {
	t.Helper()
	e, ok, err := r.Lookup(context.Background(), name)
	if !ok || err != nil {
		t.Fatalf("lookup %s: %v %v", name, ok, err)
	}
	return e
}

// Replicas share the vectors through Redis: the second embeds only its
// query. Keys expire; a value that is not a vector is a miss, never a
// vector; a Redis that is gone costs the cache, not the answer.
func TestSearchRedisVectorCache(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	client := srv.Client(t)
	cache := NewRedisVectorCache(client, RedisVectorCacheOptions{Prefix: "t", TTL: time.Hour, Timeout: 500 * time.Millisecond})
	emb1, emb2 := newMockEmbedder(t), newMockEmbedder(t)
	r1 := newSearchRegistry(t, searchConfig(), WithEmbedder(emb1), WithVectorCache(cache))
	r2 := newSearchRegistry(t, searchConfig(), WithEmbedder(emb2), WithVectorCache(cache))
	q := Query{Text: "find hotels in Paris"}
	a1, err := r1.Search(ctx, "orch", q, 0)
	if err != nil || a1.Ranking != RankSemantic {
		t.Fatalf("%+v %v", a1, err)
	}
	if n := len(emb1.take()); n != 6 {
		t.Fatalf("replica 1: %d calls, want 6", n)
	}
	a2, err := r2.Search(ctx, "orch", q, 0)
	if err != nil || a2.Ranking != RankSemantic {
		t.Fatalf("%+v %v", a2, err)
	}
	if got := emb2.take(); !slices.Equal(got, []string{"orch: find hotels in Paris"}) {
		t.Fatalf("replica 2: calls %v, want the query text only", got)
	}
	if !slices.Equal(hitNames(a1.Data), hitNames(a2.Data)) || a1.Data[0].Score != a2.Data[0].Score {
		t.Errorf("replicas disagree: %v %v", hitNames(a1.Data), hitNames(a2.Data))
	}

	e := mustLookup(t, r1, "hotel_search")
	key := cache.Key(VectorKey{AgentID: "hotel_search", ProfileSHA256: sha256Hex([]byte(ProfileText(e))), Model: "mock/mock-embed"})
	if ttl, err := client.TTL(ctx, key).Result(); err != nil || ttl <= 0 || ttl > time.Hour {
		t.Fatalf("key %s: TTL %v %v", key, ttl, err)
	}
	keys, _ := client.Keys(ctx, "t:registry:embedding:*").Result()
	if len(keys) != 5 {
		t.Errorf("keys %v, want one per agent", keys)
	}

	for _, bad := range []string{"short", string(make([]byte, 64))} { // 7 bytes; the zero vector
		if err := client.Set(ctx, key, bad, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := cache.Get(ctx, VectorKey{AgentID: "hotel_search", ProfileSHA256: sha256Hex([]byte(ProfileText(e))), Model: "mock/mock-embed"}); ok || err == nil {
			t.Errorf("%q read as a vector (%v)", bad, err)
		}
	}
	r3 := newSearchRegistry(t, searchConfig(), WithEmbedder(emb2), WithVectorCache(cache))
	if a3, err := r3.Search(ctx, "orch", q, 0); err != nil || a3.Ranking != RankSemantic || a3.Data[0].AgentName != "hotel_search" {
		t.Fatalf("with a corrupt cached vector: %+v %v", a3, err)
	}
	if got := emb2.take(); len(got) != 2 || !slices.Contains(got, ProfileCaller+": "+ProfileText(e)) {
		t.Errorf("corrupt vector: calls %v, want hotel_search's profile embedded again", got)
	}

	srv.Stop()
	r4 := newSearchRegistry(t, searchConfig(), WithEmbedder(emb2), WithVectorCache(cache))
	start := time.Now()
	a4, err := r4.Search(ctx, "orch", q, 0)
	if err != nil || a4.Ranking != RankSemantic || a4.Data[0].AgentName != "hotel_search" {
		t.Fatalf("without Redis: %+v %v", a4, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("without Redis the query took %v", d)
	}
}

// An embeddings call that fails, or answers what cannot be compared, costs
// the semantic ranking, never the answer: it is ranked lexically and says
// so.
func TestSearchFallsBackToLexical(t *testing.T) {
	tests := []struct {
		name string
		fail func(agentID, text string) error
		// emb replaces the mock's answer when set.
		emb      Embedder
		wantNote string
	}{
		{name: "query text refused", fail: func(a, _ string) error {
			if a == "orch" {
				return errors.New("429 rate limited")
			}
			return nil
		}, wantNote: "embeddings call failed"},
		// The gateway's own call refused (its limits spent, say).
		{name: "one profile refused", fail: func(a, s string) error {
			if a == ProfileCaller && strings.HasPrefix(s, "name: translator\n") {
				return errors.New("403 model not allowed")
			}
			return nil
		}, wantNote: "embeddings call failed"},
		{name: "no vector", emb: embedFunc(func(context.Context, string, []string) ([][]float64, error) { return nil, nil }), wantNote: "failed"},
		{name: "NaN", emb: embedFunc(func(_ context.Context, _ string, texts []string) ([][]float64, error) {
			return [][]float64{{math.NaN(), 1}}, nil
		}), wantNote: "failed"},
		{name: "zero vector", emb: embedFunc(func(context.Context, string, []string) ([][]float64, error) { return [][]float64{{0, 0}}, nil }), wantNote: "failed"},
		{name: "profile of another dimension", emb: embedFunc(func(_ context.Context, a string, _ []string) ([][]float64, error) {
			if a == "orch" {
				return [][]float64{{1, 0, 0}}, nil
			}
			return [][]float64{{1, 0}}, nil
		}), wantNote: "failed"},
		{name: "too slow", emb: embedFunc(func(ctx context.Context, _ string, _ []string) ([][]float64, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}), wantNote: "failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e Embedder = tc.emb
			if e == nil {
				m := newMockEmbedder(t)
				m.fail = tc.fail
				e = m
			}
			var logs bytes.Buffer
			r, err := New(searchConfig(), NewMemoryStore(), WithEmbedder(e), WithEmbedTimeout(50*time.Millisecond), WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{w: &logs}, nil))))
			if err != nil {
				t.Fatal(err)
			}
			ans, err := r.Search(context.Background(), "orch", Query{Text: "find hotels in Paris"}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if ans.Ranking != RankLexical || !strings.Contains(ans.RankingNote, tc.wantNote) || len(ans.Data) == 0 || ans.Data[0].AgentName != "hotel_search" || ans.Data[0].Method != RankLexical {
				t.Errorf("answer %+v", ans)
			}
			if !strings.Contains(logs.String(), "semantic ranking failed") {
				t.Errorf("not logged: %s", logs.String())
			}
		})
	}

	// Configured, but no embedder wired: lexical, with a note. Not
	// configured: lexical, nothing to note.
	r := newSearchRegistry(t, searchConfig())
	if ans, _ := r.Search(context.Background(), "orch", Query{Text: "hotels"}, 0); ans.Ranking != RankLexical || !strings.Contains(ans.RankingNote, "not available") {
		t.Errorf("configured, no embedder: %+v", ans)
	}
	cfg := searchConfig()
	cfg.Registry.Embeddings = nil
	r = newSearchRegistry(t, cfg, WithEmbedder(newMockEmbedder(t)))
	if ans, _ := r.Search(context.Background(), "orch", Query{Text: "hotels"}, 0); ans.Ranking != RankLexical || ans.RankingNote != "" {
		t.Errorf("not configured: %+v", ans)
	}
}

type embedFunc func(ctx context.Context, agentID string, texts []string) ([][]float64, error)

func (f embedFunc) Embed(ctx context.Context, agentID string, texts []string) ([][]float64, error) {
	return f(ctx, agentID, texts)
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestSearchFiltersByTags(t *testing.T) {
	r := newSearchRegistry(t, searchConfig(), WithEmbedder(newMockEmbedder(t)))
	tests := []struct {
		name string
		q    Query
		want []string
	}{
		{"one tag", Query{Tags: []string{"travel"}}, []string{"flight_booker", "hotel_search"}},
		{"every tag", Query{Tags: []string{"travel", "eu"}}, []string{"hotel_search"}},
		{"exact match", Query{Tags: []string{"Travel"}}, []string{}},
		{"unknown tag", Query{Tags: []string{"travel", "nope"}}, []string{}},
		{"tags and text", Query{Text: "find hotels", Tags: []string{"travel"}}, []string{"hotel_search", "flight_booker"}},
		// The text ranks, the tags filter: code_reviewer (dev) is the
		// best match for the words but not a travel agent.
		{"tags filter text", Query{Text: "review code changes", Tags: []string{"travel"}}, []string{"flight_booker", "hotel_search"}},
		{"tags and verb", Query{Verb: "book", Tags: []string{"travel"}}, []string{"flight_booker"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ans, err := r.Search(context.Background(), "orch", tc.q, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := hitNames(ans.Data); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			for _, m := range ans.Data {
				for _, tag := range tc.q.Tags {
					if !slices.Contains(m.Tags, tag) {
						t.Errorf("%s (tags %v) answers tags %v", m.AgentName, m.Tags, tc.q.Tags)
					}
				}
			}
		})
	}
}

func TestSearchTopK(t *testing.T) {
	cfg := &config.Config{Agents: map[string]*roster.Agent{}}
	for i := range 60 {
		cfg.Agents[fmt.Sprintf("a%02d", i)] = &roster.Agent{Profile: roster.Profile{Tags: []string{"bulk"}, Description: "bulk worker"}}
	}
	r := newSearchRegistry(t, cfg)
	for _, tc := range []struct{ topK, want int }{{0, DefaultTopK}, {-1, DefaultTopK}, {1, 1}, {7, 7}, {50, 50}, {51, MaxTopK}, {1000, MaxTopK}} {
		for _, q := range []Query{{Tags: []string{"bulk"}}, {Text: "bulk worker"}} {
			ans, err := r.Search(context.Background(), "orch", q, tc.topK)
			if err != nil || len(ans.Data) != tc.want {
				t.Errorf("top_k %d, %+v: %d hits, want %d (%v)", tc.topK, q, len(ans.Data), tc.want, err)
			}
			if len(ans.Data) > 0 && ans.Data[0].AgentName != "a00" {
				t.Errorf("ties go by name: %v", hitNames(ans.Data))
			}
		}
	}
}

// A configured embedding is used as given: the agent's profile is never
// embedded, and its semantic part is the cosine with that vector. One of
// another dimension leaves the agent out of text answers (logged once, in
// the note), not out of structural ones.
func TestSearchConfiguredEmbeddings(t *testing.T) {
	ctx := context.Background()
	cfg := searchConfig()
	// The vector says "zebra", whatever the description says.
	cfg.Agents["code_reviewer"].Embedding = mock.Embedding("zebra stripes savanna")
	emb := newMockEmbedder(t)
	r := newSearchRegistry(t, cfg, WithEmbedder(emb))
	ans, err := r.Search(ctx, "orch", Query{Text: "zebra stripes"}, 0)
	if err != nil || ans.Ranking != RankSemantic || len(ans.Data) == 0 || ans.Data[0].AgentName != "code_reviewer" {
		t.Fatalf("%+v %v", ans, err)
	}
	want := round3(cosine(mock.Embedding("zebra stripes"), cfg.Agents["code_reviewer"].Embedding))
	if got := *ans.Data[0].ScoreParts.Semantic; math.Abs(got-want) > 0.002 {
		t.Errorf("semantic part %v, want the cosine with the configured vector, %v", got, want)
	}
	if slices.Contains(agentsOf(emb.take()), "code_reviewer") {
		t.Error("the agent with a configured embedding was embedded")
	}

	cfg = searchConfig()
	cfg.Agents["hotel_search"].Embedding = []float64{1, 0, 0, 0, 0, 0, 0, 0}
	var logs bytes.Buffer
	r, err = New(cfg, NewMemoryStore(), WithEmbedder(newMockEmbedder(t)), WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{w: &logs}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		ans, err = r.Search(ctx, "orch", Query{Text: "find hotels in Paris"}, 0)
		if err != nil || ans.Ranking != RankSemantic {
			t.Fatalf("%+v %v", ans, err)
		}
		if slices.Contains(hitNames(ans.Data), "hotel_search") || !strings.Contains(ans.RankingNote, "hotel_search") || !strings.Contains(ans.RankingNote, "256 dimensions") {
			t.Fatalf("dimension mismatch: %v, note %q", hitNames(ans.Data), ans.RankingNote)
		}
	}
	if n := strings.Count(logs.String(), "does not fit the embeddings model"); n != 1 {
		t.Errorf("logged %d times, want once: %s", n, logs.String())
	}
	if ans, _ := r.Search(ctx, "orch", Query{Verb: "search"}, 0); !slices.Equal(hitNames(ans.Data), []string{"hotel_search"}) {
		t.Errorf("structural query: %v", hitNames(ans.Data))
	}
}

// Queries without text answer as before: same agents, same scores, same
// "matched"; the answer says it ranked structurally.
func TestSearchKeepsStructuralQueries(t *testing.T) {
	r, err := New(testConfig(), NewMemoryStore(), WithEmbedder(embedFunc(func(context.Context, string, []string) ([][]float64, error) {
		return nil, errors.New("a structural query must not embed")
	})))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []Query{
		{Verb: "predict", Inputs: []string{"history"}, OutputType: "predictions"}, {Verb: "predict"},
		{Verb: "predict", Inputs: []string{"method", "window", "lag"}}, {OutputType: "list"}, {Inputs: []string{"history"}},
	} {
		old, _ := r.Query(context.Background(), q)
		ans, err := r.Search(context.Background(), "orch", q, 0)
		if err != nil || ans.Ranking != RankStructural || !reflectEqualJSON(t, old, ans.Data) {
			t.Errorf("%+v: search %+v, query %+v (%v)", q, ans.Data, old, err)
		}
		for _, m := range ans.Data {
			if m.Method != RankStructural || m.ScoreParts != nil {
				t.Errorf("%+v: hit %+v", q, m)
			}
		}
	}
}

func reflectEqualJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestProfileText(t *testing.T) {
	r := newSearchRegistry(t, searchConfig())
	got := ProfileText(mustLookup(t, r, "hotel_search"))
	want := "name: hotel_search\ndescription: Finds hotels in a city within a nightly budget\nverbs: search, rank\ntools: H_API\n" +
		"tags: travel, eu\ninputs: c, p_max\noutputs: list"
	if got != want {
		t.Errorf("profile\n%s\nwant\n%s", got, want)
	}
	if got := ProfileText(Entry{AgentName: "x", Profile: roster.Profile{Description: strings.Repeat("é", 5000)}}); len(got) > maxProfileBytes || !strings.HasSuffix(got, "é") {
		t.Errorf("clipped profile: %d bytes, ends %q", len(got), got[len(got)-4:])
	}
}

// BM25 by hand on a three-document collection.
func TestBM25(t *testing.T) {
	v := &view{entries: []Entry{{AgentName: "a", Profile: roster.Profile{Description: "hotel hotel"}}, {AgentName: "b", Profile: roster.Profile{Description: "flight"}}, {AgentName: "c"}}}
	idx := v.textIndex()
	// Profiles: "name: a\ndescription: hotel hotel" = name a description
	// hotel hotel (5 tokens); b: 4; c: 2. avgdl 11/3.
	dl, avg := 5.0, 11.0/3
	idf := math.Log(1 + (3-1+0.5)/(1+0.5))
	want := idf * 2 * 2.2 / (2 + 1.2*(0.25+0.75*dl/avg))
	if got := idx.bm25(0, []string{"hotel"}); math.Abs(got-want) > 1e-12 {
		t.Errorf("bm25 = %v, want %v", got, want)
	}
	if got := idx.bm25(1, []string{"hotel"}); got != 0 {
		t.Errorf("a document without the term: %v", got)
	}
	if !slices.Equal(tokens("Find HOTELS, in Paris-Nord (2 stars)!"), []string{"find", "hotels", "in", "paris", "nord", "2", "stars"}) {
		t.Errorf("tokens %v", tokens("Find HOTELS, in Paris-Nord (2 stars)!"))
	}
}

// The answer of POST /registry/query: ranking, top_k, score parts and the
// operator's facts about a hit; nothing found: a suggestion.
func TestQueryHandler(t *testing.T) {
	r := newSearchRegistry(t, searchConfig(), WithEmbedder(newMockEmbedder(t)))
	api := &API{Registry: r, Log: slog.New(slog.DiscardHandler)}
	post := func(body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/registry/query", strings.NewReader(body))
		req = scope.Attach(req, &scope.Exchange{Agent: &roster.Agent{ID: "orch", MaxRequestSize: 1 << 20}})
		w := httptest.NewRecorder()
		api.Query(w, req)
		var out map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s: %v", w.Body, err)
		}
		return w.Code, out
	}
	code, out := post(`{"query":{"text":"find hotels in Paris","tags":["travel"]},"top_k":1}`)
	data, _ := out["data"].([]any)
	if code != 200 || out["ranking"] != RankSemantic || out["top_k"] != 1.0 || len(data) != 1 || out["suggestion"] != nil {
		t.Fatalf("%d %v", code, out)
	}
	hit := data[0].(map[string]any)
	parts, _ := hit["score_parts"].(map[string]any)
	if hit["agent_name"] != "hotel_search" || hit["method"] != RankSemantic || parts["semantic"] == nil || parts["structural"] != 0.0 ||
		hit["confidence_score"] != 0.9 || hit["version"] != "2.1.0" || hit["agent_location"] != "eu-west-1" || hit["embedding"] != nil || hit["endpoint"] != nil {
		t.Errorf("hit %v", hit)
	}
	_, out = post(`{"query":{"verb":"predict"}}`)
	hit = out["data"].([]any)[0].(map[string]any)
	if out["ranking"] != RankStructural || out["top_k"] != 5.0 || hit["score"] != 0.4 || hit["score_parts"] != nil || hit["confidence_score"] != nil {
		t.Errorf("structural answer %v", out)
	}
	_, out = post(`{"query":{"verb":"fly","output_type":"ticket"}}`)
	if s, _ := out["suggestion"].(map[string]any); len(out["data"].([]any)) != 0 || s["spawn"] == nil {
		t.Errorf("empty answer %v", out)
	}
	if code, _ := post(`{"query":{"text":"x"},"top_k":51}`); code != 400 {
		t.Errorf("top_k 51: %d", code)
	}
}

// An empty answer's suggestion is a SPAWN_AGENT message POST /registry/spawn
// accepts as is; once spawned, the agent answers the query.
func TestEmptyAnswerSuggestsSpawn(t *testing.T) {
	tests := []struct {
		name      string
		q         Query
		agent     string
		verb      string
		tool      string
		requery   Query // finds the spawned agent; zero: not checked
		wantInput []string
	}{
		{"new verb and output", Query{Verb: "fly", OutputType: "ticket", Inputs: []string{"ctx.from", "to:string", "when:date"}},
			"FLY_TICKET_AGENT", "fly", "FLY_TICKET_TOOL", Query{Verb: "fly", OutputType: "ticket"}, []string{"ctx.from", "to:string", "when"}},
		{"library verb in another case", Query{Verb: "SEARCH", Tags: []string{"cars"}},
			"SEARCH_AGENT", "search", "SEARCH_TOOL", Query{Verb: "search", OutputType: "list"}, nil},
		{"a verb's alias is the verb", Query{Verb: "s", Tags: []string{"cars"}},
			"SEARCH_AGENT", "search", "SEARCH_TOOL", Query{Verb: "search", OutputType: "list"}, nil},
		{"text names a library verb", Query{Text: "An agent to search rental cars in Lyon", Tags: []string{"cars"}},
			"SEARCH_RENTAL_CARS_AGENT", "search", "SEARCH_RENTAL_CARS_TOOL", Query{Text: "rental cars"}, nil},
		{"text only, new verb", Query{Text: "Übersetze Verträge ins Deutsche!", Tags: []string{"legal"}},
			"BERSETZE_VERTR_GE_INS_AGENT", "bersetze", "", Query{}, nil}, // letters outside A-Z go
		{"reserved verb", Query{Verb: "join", Tags: []string{"x"}}, "JOIN_AGENT", "handle", "JOIN_TOOL", Query{}, nil},
		{"taken names get a number", Query{Verb: "hotel_search", Text: "hotel search", Tags: []string{"nope"}},
			"HOTEL_SEARCH_AGENT", "hotel_search", "", Query{}, nil},
		{"nothing usable for a name", Query{Text: "?!", Verb: "é", Tags: []string{"x"}}, "NEW_AGENT", "handle", "NEW_TOOL", Query{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := searchConfig()
			if strings.HasPrefix(tc.name, "taken") {
				cfg.Agents["HOTEL_SEARCH_AGENT"] = &roster.Agent{}
				cfg.Registry.Tools = append(cfg.Registry.Tools, config.Tool{ID: "HOTEL_SEARCH_2_TOOL", SupportedVerbs: []string{"search"}})
				tc.agent = "HOTEL_SEARCH_3_AGENT"
			}
			r := newSearchRegistry(t, cfg)
			ans, err := r.Search(ctx, "orch", tc.q, 0)
			if err != nil || len(ans.Data) != 0 || ans.Suggestion == nil {
				t.Fatalf("%+v %v", ans, err)
			}
			raw, _ := json.Marshal(ans.Suggestion.Spawn)
			lib, _ := r.Library(ctx)
			sp, res := lib.ParseSpawn(raw)
			if !res.Valid() {
				t.Fatalf("%s: %+v", raw, res)
			}
			if sp.AgentName != tc.agent || sp.Verb != tc.verb || (tc.tool != "" && sp.Tool != tc.tool) {
				t.Errorf("%s: agent %s verb %s tool %s", raw, sp.AgentName, sp.Verb, sp.Tool)
			}
			if tc.wantInput != nil && !slices.Equal(sp.Inputs, tc.wantInput) {
				t.Errorf("inputs %v, want %v", sp.Inputs, tc.wantInput)
			}

			// As is, through the real handler: 201 and registered.
			api := &API{Registry: r, Policy: approveAll{}, Log: slog.New(slog.DiscardHandler)}
			req := httptest.NewRequest(http.MethodPost, "/registry/spawn", bytes.NewReader(raw))
			req = scope.Attach(req, &scope.Exchange{Agent: &roster.Agent{ID: "orch", MaxRequestSize: 1 << 20}})
			w := httptest.NewRecorder()
			api.Spawn(w, req)
			if w.Code != http.StatusCreated {
				t.Fatalf("spawn %s: %d %s", raw, w.Code, w.Body)
			}
			if tc.requery.Verb != "" || tc.requery.Text != "" {
				ans, _ = r.Search(ctx, "orch", tc.requery, 0)
				if len(ans.Data) == 0 || ans.Data[0].AgentName != tc.agent {
					t.Errorf("the spawned agent does not answer %+v: %v", tc.requery, hitNames(ans.Data))
				}
			}
		})
	}
}

type approveAll struct{}

func (approveAll) Spawn(context.Context, map[string]any) (policy.SpawnDecision, error) {
	return policy.SpawnDecision{Status: "approved", Reasons: []string{"test"}}, nil
}

// Every Redis call of the package has a deadline: against a server that
// accepts connections and never answers, each call gives up on time, and
// a query still gets its semantic answer.
func TestRedisCallsHaveDeadlines(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	// As the gateway builds its client (limit.NewRedisClient): context
	// deadlines bound reads; the socket timeouts are far longer here, so
	// only the deadlines can end the calls in time.
	client := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ContextTimeoutEnabled: true, MaxRetries: -1,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute, DialTimeout: time.Minute, PoolTimeout: time.Minute})
	t.Cleanup(func() { client.Close() })

	ctx := context.Background()
	cache := NewRedisVectorCache(client, RedisVectorCacheOptions{Timeout: 100 * time.Millisecond})
	store := NewRedisStore(client, "")
	store.timeout = 100 * time.Millisecond
	k := VectorKey{AgentID: "a", ProfileSHA256: "h", Model: "m"}
	for name, call := range map[string]func() error{
		"cache get":       func() error { _, _, err := cache.Get(ctx, k); return err },
		"cache put":       func() error { return cache.Put(ctx, k, []float64{1}) },
		"store add":       func() error { return store.Add(ctx, Entry{AgentName: "a"}) },
		"store list":      func() error { _, err := store.List(ctx); return err },
		"store remove":    func() error { return store.Remove(ctx, "a") },
		"store last used": func() error { return store.SetLastUsed(ctx, "a", time.Now()) },
		"store put pending": func() error {
			return store.PutPending(ctx, "k", strings.Repeat("0", 64), time.Now().Add(time.Hour))
		},
		"store take pending": func() error { _, _, err := store.TakePending(ctx, "k", time.Now()); return err },
	} {
		start := time.Now()
		if err := call(); err == nil || time.Since(start) > 2*time.Second {
			t.Errorf("%s: %v after %v", name, err, time.Since(start))
		}
	}

	r := newSearchRegistry(t, searchConfig(), WithEmbedder(newMockEmbedder(t)), WithVectorCache(cache))
	start := time.Now()
	ans, err := r.Search(ctx, "orch", Query{Text: "find hotels"}, 0)
	if err != nil || ans.Ranking != RankSemantic || ans.Data[0].AgentName != "hotel_search" || time.Since(start) > 5*time.Second {
		t.Errorf("with a hung Redis: %+v %v after %v", ans, err, time.Since(start))
	}
}
