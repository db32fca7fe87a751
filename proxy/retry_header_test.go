package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/upstream"
)

// The 429 tests call the gateway with the official OpenAI SDK and its
// default retry policy (two retries, sleeping on Retry-After when it is
// under a minute), as an agent would: a limit that resets far away must
// fail the call at once, one that resets soon must still be retried.

// limitedGateway serves the mock model to the agents of agentsYAML (each
// one's token is "tok-" + its id), with memory limits the test can drain.
type limitedGateway struct {
	url      string
	requests *limit.Memory
	tokens   *limit.MemoryBudget
}

func newLimitedGateway(t *testing.T, agentsYAML string, ids ...string) *limitedGateway {
	t.Helper()
	dir := t.TempDir()
	agents := agentsYAML
	for _, id := range ids {
		agents = strings.ReplaceAll(agents, "%"+id+"%", roster.HashTokenHex("tok-"+id))
	}
	files := map[string]string{
		config.GatewayFile: "listen: \"127.0.0.1:0\"\nupstreams:\n  - {name: mock, type: mock, models: [\"mock-*\"]}\n" +
			"pricing:\n  mock-1: {input: 1000, output: 1000}\n" +
			"audit: {dir: " + strconv.Quote(filepath.Join(dir, "audit")) + ", chain: t}\n",
		config.AgentsFile:   agents,
		config.ProtocolFile: "protocol:\n  version: \"1.0\"\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	ups, err := upstream.New(cfg.Gateway.Upstreams, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ups.Close)
	g := &limitedGateway{requests: limit.NewMemory(), tokens: limit.NewMemoryBudget()}
	gw, err := proxy.New(proxy.Deps{Config: cfg, Upstreams: ups, Requests: g.requests, Tokens: g.tokens,
		Log: log, Audit: door.NewRecorder(&testkit.Trail{}, cfg.Gateway.Audit, log), KeepAlive: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ex := &scope.Exchange{RequestID: fmt.Sprintf("req-%d", time.Now().UnixNano()), Start: time.Now()}
		gw.ChatCompletions().ServeHTTP(w, scope.Attach(r, ex))
	}))
	t.Cleanup(front.Close)
	g.url = front.URL + "/v1/"
	return g
}

// seen is one HTTP answer the SDK received.
type seen struct {
	status      int
	retryAfter  string
	shouldRetry string
}

// sdkCall asks for one completion with the SDK's default retries and
// returns every HTTP answer the SDK saw, the time it took and the error.
func sdkCall(t *testing.T, baseURL, token string, maxTokens int64) ([]seen, time.Duration, error) {
	t.Helper()
	var mu sync.Mutex
	var answers []seen
	record := func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if err == nil {
			mu.Lock()
			answers = append(answers, seen{resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-Should-Retry")})
			mu.Unlock()
		}
		return resp, err
	}
	client := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey(token), option.WithMiddleware(record))
	// Bounded: without x-should-retry the SDK would sleep on a 20 s
	// Retry-After twice. Its sleep does not watch the context, but the
	// retry after it fails on the deadline, so a broken gateway fails the
	// test in one sleep rather than two.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	params := openai.ChatCompletionNewParams{Model: "mock-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	if maxTokens > 0 {
		params.MaxTokens = openai.Int(maxTokens)
	}
	start := time.Now()
	_, err := client.Chat.Completions.New(ctx, params)
	elapsed := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	return append([]seen(nil), answers...), elapsed, err
}

var retryAgentIDs = []string{"requests", "tokens", "budget", "requests-soon", "tokens-soon"}

const retryAgents = `agents:
  requests:
    type: coder
    token_sha256: "%requests%"
    rate_limit: 3/minute
  tokens:
    type: coder
    token_sha256: "%tokens%"
    token_limit: 30/minute
  budget:
    type: coder
    token_sha256: "%budget%"
    budget: 0.01USD/hour
  requests-soon:
    type: coder
    token_sha256: "%requests-soon%"
    rate_limit: 2/second
  tokens-soon:
    type: coder
    token_sha256: "%tokens-soon%"
    token_limit: 6000/minute
`

// TestFarResetFailsFast: a 429 of the gateway's own limits (requests,
// tokens, dollars) that resets more than 10 s away carries
// x-should-retry: false beside Retry-After, and the SDK returns the 429 at
// once: one HTTP call, no sleep.
func TestFarResetFailsFast(t *testing.T) {
	g := newLimitedGateway(t, retryAgents, retryAgentIDs...)
	ctx := context.Background()
	cases := []struct {
		agent string
		// drain empties the agent's limit first, so that the call is
		// refused whatever the machine's speed.
		drain     func()
		maxTokens int64
		code      string
	}{
		{"requests", func() { _, _ = g.requests.Allow(ctx, "req:requests", limit.Rule{N: 3, Period: time.Minute}, 3) }, 0, "rate_limit_exceeded"},
		{"tokens", func() { _, _ = g.tokens.Reserve(ctx, "tok:tokens", limit.Rule{N: 30, Period: time.Minute}, 30) }, 5, "rate_limit_exceeded"},
		// 100 tokens at $1000 per million is $0.10: more than the whole
		// budget, which no wait can make room for.
		{"budget", func() {}, 100, "budget_exceeded"},
	}
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			c.drain()
			answers, elapsed, err := sdkCall(t, g.url, "tok-"+c.agent, c.maxTokens)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != c.code {
				t.Fatalf("err = %v after %s; want the 429 %s", err, elapsed, c.code)
			}
			if len(answers) != 1 {
				t.Errorf("the SDK made %d calls (%+v); want 1: no retry of a far reset", len(answers), answers)
			}
			ra, _ := strconv.Atoi(answers[0].retryAfter)
			if ra <= 10 || answers[0].shouldRetry != "false" {
				t.Errorf("answer %+v: want Retry-After over 10 and x-should-retry false", answers[0])
			}
			if elapsed > 2*time.Second {
				t.Errorf("the call took %s: the client waited", elapsed)
			}
		})
	}
}

// TestNearResetIsRetried: a 429 that resets within 10 s keeps today's
// answer, Retry-After without x-should-retry, so the SDK sleeps on it and
// its retry passes.
func TestNearResetIsRetried(t *testing.T) {
	g := newLimitedGateway(t, retryAgents, retryAgentIDs...)
	ctx := context.Background()
	cases := []struct {
		agent     string
		drain     func()
		maxTokens int64
	}{
		{"requests-soon", func() {
			_, _ = g.requests.Allow(ctx, "req:requests-soon", limit.Rule{N: 2, Period: time.Second}, 2)
		}, 0},
		{"tokens-soon", func() {
			_, _ = g.tokens.Reserve(ctx, "tok:tokens-soon", limit.Rule{N: 6000, Period: time.Minute}, 6000)
		}, 5},
	}
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			c.drain()
			answers, elapsed, err := sdkCall(t, g.url, "tok-"+c.agent, c.maxTokens)
			if err != nil {
				t.Fatalf("err = %v after %s (answers %+v); want the retry to pass", err, elapsed, answers)
			}
			if len(answers) < 2 || answers[0].status != http.StatusTooManyRequests || answers[len(answers)-1].status != http.StatusOK {
				t.Fatalf("answers %+v: want a 429, then the retry's 200", answers)
			}
			first := answers[0]
			if first.retryAfter != "1" || first.shouldRetry != "" {
				t.Errorf("first answer %+v: want Retry-After 1 and no x-should-retry", first)
			}
			if elapsed < 900*time.Millisecond {
				t.Errorf("the call took %s: the SDK did not sleep on Retry-After", elapsed)
			}
		})
	}
}
