package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// The failover tests run a gateway in front of several test upstreams and
// call it with the official OpenAI SDK, as an agent would.

// provider is one test upstream; its answer can be changed between calls.
type provider struct {
	name string
	// yaml is the rest of its upstreams entry ("priority: 1, weight: 3").
	yaml string
	// dead: its URL refuses connections.
	dead bool

	mu     sync.Mutex
	answer http.HandlerFunc
	hits   atomic.Int32
	bodies []string
}

func (p *provider) set(h http.HandlerFunc) {
	p.mu.Lock()
	p.answer = h
	p.mu.Unlock()
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.hits.Add(1)
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b)) // the answer may read it too
	p.mu.Lock()
	p.bodies = append(p.bodies, string(b))
	h := p.answer
	p.mu.Unlock()
	h(w, r)
}

type fleet struct {
	t      *testing.T
	ups    *upstream.Set
	audit  *testkit.Trail
	clock  *testkit.Clock
	client openai.Client
	// exchanges receives each request's Exchange once the gateway is done with it.
	exchanges chan *scope.Exchange
}

type fleetOpts struct {
	timeout string // timeouts.response; default 5s
	// agent is added to the agent's entry ("    response_format: json_standard\n").
	agent string
}

// newFleet builds the gateway for providers, in that config order, every
// one serving "gpt-*", with no retries of their own.
func newFleet(t *testing.T, ps []*provider, o fleetOpts) *fleet {
	t.Helper()
	var list strings.Builder
	for _, p := range ps {
		srv := httptest.NewServer(p)
		url := srv.URL
		if p.dead {
			srv.Close()
		} else {
			t.Cleanup(srv.Close)
		}
		extra := ""
		if p.yaml != "" {
			extra = ", " + p.yaml
		}
		fmt.Fprintf(&list, "  - {name: %s, type: openai, base_url: %s/v1, api_key: sk-%s, max_retries: 0, models: [\"gpt-*\"]%s}\n", p.name, url, p.name, extra)
	}
	if o.timeout == "" {
		o.timeout = "5s"
	}
	dir := t.TempDir()
	files := map[string]string{
		config.GatewayFile: "listen: \"127.0.0.1:0\"\nupstreams:\n" + list.String() +
			"audit: {dir: " + strconv.Quote(filepath.Join(dir, "audit")) + ", chain: t, fail_mode: closed}\n",
		config.AgentsFile:   "agents:\n  plain:\n    type: coder\n    token_sha256: \"" + roster.HashTokenHex("tok-plain") + "\"\n    rate_limit: 100000/minute\n" + o.agent,
		config.ProtocolFile: "protocol:\n  timeouts:\n    response: " + o.timeout + "\n",
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
	f := &fleet{t: t, audit: &testkit.Trail{}, clock: testkit.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)),
		exchanges: make(chan *scope.Exchange, 1000)}
	log := slog.New(slog.DiscardHandler)
	f.ups, err = upstream.New(cfg.Gateway.Upstreams, log, upstream.WithClock(f.clock.Now), upstream.WithRand(rand.NewPCG(15, 2025)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.ups.Close)
	gw, err := proxy.New(proxy.Deps{Config: cfg, Upstreams: f.ups, Requests: limit.NewMemory(), Tokens: limit.NewMemoryBudget(),
		Log: log, Audit: door.NewRecorder(f.audit, cfg.Gateway.Audit, log), KeepAlive: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ex := &scope.Exchange{RequestID: fmt.Sprintf("req-%d", time.Now().UnixNano()), Start: time.Now()}
		gw.ChatCompletions().ServeHTTP(w, scope.Attach(r, ex))
		f.exchanges <- ex
	}))
	t.Cleanup(front.Close)
	f.client = openai.NewClient(option.WithBaseURL(front.URL+"/v1/"), option.WithAPIKey("tok-plain"), option.WithMaxRetries(0))
	return f
}

// chat asks once and returns the answer's content or the error, and the
// request's Exchange.
func (f *fleet) chat(stream bool) (string, *scope.Exchange, error) {
	f.t.Helper()
	params := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	var content string
	var err error
	if stream {
		s := f.client.Chat.Completions.NewStreaming(context.Background(), params)
		for s.Next() {
			if c := s.Current(); len(c.Choices) > 0 {
				content += c.Choices[0].Delta.Content
			}
		}
		err = s.Err()
		s.Close()
	} else {
		var got *openai.ChatCompletion
		got, err = f.client.Chat.Completions.New(context.Background(), params)
		if err == nil {
			content = got.Choices[0].Message.Content
		}
	}
	select {
	case ex := <-f.exchanges:
		return content, ex, err
	case <-time.After(10 * time.Second):
		f.t.Fatal("the gateway did not finish the request")
		return "", nil, nil
	}
}

func answers(content string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`, content)
	}
}

// answersEither answers a stream when one is asked for.
func answersEither(content string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), `"stream":true`) {
			answers(content)(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", content)
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}
}

func status(code int, retryAfter string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"message":"status %d","type":"invalid_request_error","code":"c%d","param":"temperature"}}`, code, code)
	}
}

func slow(d time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
	}
}

// slowStream sends its headers at once, then n chunks of content, every
// gap apart.
func slowStream(content string, n int, gap time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for i := 0; i < n; i++ {
			time.Sleep(gap)
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", content)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}
}

func failoverNames(ex *scope.Exchange) []string {
	var out []string
	for _, f := range ex.Failovers {
		out = append(out, f.Upstream+":"+f.Reason)
	}
	return out
}

func TestFailoverBeforeTheFirstByte(t *testing.T) {
	cases := []struct {
		name  string
		first http.HandlerFunc // nil: a dead address
		// firstYAML is the rest of a's upstreams entry.
		firstYAML string
		second    http.HandlerFunc
		stream    bool
		timeout   string
		// want: the content the agent gets, or the status of its error.
		want       string
		wantStatus int
		wantUp     string
		wantFail   []string
		wantHits   [2]int32
	}{
		{name: "429 then the second answers", first: status(429, "7"), second: answers("from b"),
			want: "from b", wantUp: "b", wantFail: []string{"a:status_429"}, wantHits: [2]int32{1, 1}},
		{name: "5xx then the second answers", first: status(503, ""), second: answers("from b"),
			want: "from b", wantUp: "b", wantFail: []string{"a:status_503"}, wantHits: [2]int32{1, 1}},
		{name: "connection refused then the second answers", second: answers("from b"),
			want: "from b", wantUp: "b", wantFail: []string{"a:connect_error"}, wantHits: [2]int32{0, 1}},
		{name: "a stream fails over before its headers", first: status(502, ""), second: answersEither("streamed by b"), stream: true,
			want: "streamed by b", wantUp: "b", wantFail: []string{"a:status_502"}, wantHits: [2]int32{1, 1}},
		{name: "a 400 is an answer: passed on, no failover", first: status(400, ""), second: answers("from b"),
			wantStatus: 400, wantUp: "a", wantHits: [2]int32{1, 0}},
		{name: "every candidate fails: the last failure, a 429, is passed on", first: status(503, ""), second: status(429, "3"),
			wantStatus: 429, wantUp: "b", wantFail: []string{"a:status_503"}, wantHits: [2]int32{1, 1}},
		{name: "every candidate fails: the last failure, a 5xx, is a 502", first: status(429, "3"), second: status(500, ""),
			wantStatus: 502, wantUp: "b", wantFail: []string{"a:status_429"}, wantHits: [2]int32{1, 1}},
		{name: "the gateway's deadline ends the exchange: a 504, no failover", first: slow(3 * time.Second), second: answers("from b"), timeout: "200ms",
			wantStatus: 504, wantUp: "a", wantHits: [2]int32{1, 0}},
		{name: "no headers within first_byte_timeout: the second answers", first: slow(3 * time.Second), firstYAML: "first_byte_timeout: 100ms", second: answers("from b"),
			want: "from b", wantUp: "b", wantFail: []string{"a:first_byte_timeout"}, wantHits: [2]int32{1, 1}},
		{name: "a stream that began in time is never cut by first_byte_timeout", first: slowStream("slow but steady", 3, 150*time.Millisecond), firstYAML: "first_byte_timeout: 100ms",
			second: answersEither("from b"), stream: true,
			want: "slow but steady" + "slow but steady" + "slow but steady", wantUp: "a", wantHits: [2]int32{1, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &provider{name: "a", answer: tc.first, dead: tc.first == nil, yaml: tc.firstYAML}
			b := &provider{name: "b", yaml: "priority: 1", answer: tc.second}
			f := newFleet(t, []*provider{a, b}, fleetOpts{timeout: tc.timeout})
			got, ex, err := f.chat(tc.stream)
			if tc.wantStatus != 0 {
				var e *openai.Error
				if !errors.As(err, &e) || e.StatusCode != tc.wantStatus {
					t.Fatalf("got %q, %v; want status %d", got, err, tc.wantStatus)
				}
			} else if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
			if ex.Upstream != tc.wantUp || ex.Route.Name != tc.wantUp {
				t.Errorf("exchange upstream %s (route %s), want %s", ex.Upstream, ex.Route.Name, tc.wantUp)
			}
			if fs := failoverNames(ex); !slices.Equal(fs, tc.wantFail) {
				t.Errorf("failovers %v, want %v", fs, tc.wantFail)
			}
			if hits := [2]int32{a.hits.Load(), b.hits.Load()}; hits != tc.wantHits {
				t.Errorf("hits a, b = %v, want %v", hits, tc.wantHits)
			}
			if tc.wantHits == [2]int32{1, 1} && a.bodies[0] != b.bodies[0] {
				t.Errorf("the second upstream got other bytes:\n%s\n%s", a.bodies[0], b.bodies[0])
			}
			entry := f.audit.Last("llm.response")
			if entry["upstream"] != tc.wantUp {
				t.Errorf("llm.response upstream %v, want %s", entry["upstream"], tc.wantUp)
			}
			var audited []string
			names, _ := entry["failovers"].([]any)
			reasons, _ := entry["failover_reasons"].([]any)
			if len(names) != len(reasons) {
				t.Fatalf("failovers %v and reasons %v differ in length", names, reasons)
			}
			for i := range names {
				audited = append(audited, fmt.Sprint(names[i], ":", reasons[i]))
			}
			if !slices.Equal(audited, tc.wantFail) {
				t.Errorf("llm.response failovers %v, want %v (entry %v)", audited, tc.wantFail, entry)
			}
			if n := f.ups.Stats().ByUpstream()["a"].Failovers; n != int64(len(tc.wantFail)) {
				t.Errorf("failovers counted from a: %d, want %d", n, len(tc.wantFail))
			}
		})
	}
}

// A single upstream's 429 is passed on as it was before failover existed,
// the provider's error with it.
func TestSingleUpstreamPassesItsFailureOn(t *testing.T) {
	a := &provider{name: "a", answer: status(429, "9")}
	f := newFleet(t, []*provider{a}, fleetOpts{})
	_, ex, err := f.chat(false)
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 429 || e.Code != "c429" {
		t.Fatalf("got %v, want the provider's 429", err)
	}
	if len(ex.Failovers) != 0 || ex.Upstream != "a" {
		t.Errorf("exchange %s %v", ex.Upstream, ex.Failovers)
	}
}

// The breaker opens after its failures: the failing upstream gets no more
// requests; after the cooldown one probe goes through, and its failure
// opens the breaker again, its answer closes it.
func TestBreakerOpensAndProbes(t *testing.T) {
	a := &provider{name: "a", yaml: "breaker: {failures: 3, cooldown: 1m}", answer: status(503, "")}
	b := &provider{name: "b", yaml: "priority: 1", answer: answers("from b")}
	f := newFleet(t, []*provider{a, b}, fleetOpts{})
	step := func(name string, wantContent string, wantHitsA int32, wantFail ...string) {
		t.Helper()
		got, ex, err := f.chat(false)
		if err != nil || got != wantContent {
			t.Fatalf("%s: got %q, %v; want %q", name, got, err, wantContent)
		}
		if n := a.hits.Load(); n != wantHitsA {
			t.Errorf("%s: a hit %d times, want %d", name, n, wantHitsA)
		}
		if fs := failoverNames(ex); !slices.Equal(fs, wantFail) {
			t.Errorf("%s: failovers %v, want %v", name, fs, wantFail)
		}
	}
	for i := int32(1); i <= 3; i++ {
		step(fmt.Sprintf("failure %d", i), "from b", i, "a:status_503")
	}
	if n := f.ups.OpenBreakers(); n != 1 {
		t.Fatalf("open breakers %d after 3 failures, want 1", n)
	}
	step("open: a skipped", "from b", 3, "a:breaker_open")
	f.clock.Advance(59 * time.Second)
	step("still cooling down", "from b", 3, "a:breaker_open")
	f.clock.Advance(2 * time.Second)
	step("a failing probe", "from b", 4, "a:status_503")
	step("reopened", "from b", 4, "a:breaker_open")
	f.clock.Advance(61 * time.Second)
	a.set(answers("from a"))
	step("an answering probe", "from a", 5)
	if n := f.ups.OpenBreakers(); n != 0 {
		t.Errorf("open breakers %d after a good probe, want 0", n)
	}
	step("closed", "from a", 6)
	st := f.ups.Stats().ByUpstream()["a"]
	if st.BreakerOpens != 2 || st.Failovers != 4 {
		t.Errorf("stats of a %+v, want 2 openings (the first, the failed probe) and 4 failovers", st)
	}
}

// With every candidate's breaker open, the request goes to the one whose
// cooldown ends first, rather than being refused: here the second in
// priority, opened first.
func TestEveryBreakerOpen(t *testing.T) {
	a := &provider{name: "a", yaml: "breaker: {failures: 2, cooldown: 1m}", answer: status(500, "")}
	b := &provider{name: "b", yaml: "priority: 1, breaker: {failures: 1, cooldown: 1m}", answer: status(500, "")}
	f := newFleet(t, []*provider{a, b}, fleetOpts{})
	for i, want := range [][]string{{"a:status_500"}, {"b:breaker_open"}} {
		_, ex, err := f.chat(false)
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != 502 {
			t.Fatalf("request %d: got %v, want 502", i+1, err)
		}
		if fs := failoverNames(ex); !slices.Equal(fs, want) {
			t.Errorf("request %d: failovers %v, want %v", i+1, fs, want)
		}
		f.clock.Advance(10 * time.Second) // b opened at 0s, a at 10s
	}
	if f.ups.OpenBreakers() != 2 {
		t.Fatalf("open breakers %d, want 2", f.ups.OpenBreakers())
	}
	a.set(answers("from a"))
	b.set(answers("from b"))
	got, ex, err := f.chat(false)
	if err != nil || got != "from b" {
		t.Fatalf("got %q, %v; want b's answer (its cooldown ends first)", got, err)
	}
	if fs := failoverNames(ex); !slices.Equal(fs, []string{"a:breaker_open"}) {
		t.Errorf("failovers %v", fs)
	}
	if a.hits.Load() != 2 || b.hits.Load() != 2 || f.ups.OpenBreakers() != 1 {
		t.Errorf("hits a %d, b %d, open %d; want 2, 2, 1 (b's answer closed its breaker)", a.hits.Load(), b.hits.Load(), f.ups.OpenBreakers())
	}
}

// Weights 3:1 in one priority send about three requests in four to the
// first.
func TestWeightedSpread(t *testing.T) {
	a := &provider{name: "a", yaml: "priority: 0, weight: 3", answer: answers("a")}
	b := &provider{name: "b", yaml: "priority: 0, weight: 1", answer: answers("b")}
	c := &provider{name: "c", yaml: "priority: 5, weight: 100", answer: answers("c")}
	f := newFleet(t, []*provider{a, b, c}, fleetOpts{})
	const n = 400
	for range n {
		if _, _, err := f.chat(false); err != nil {
			t.Fatal(err)
		}
	}
	if ha, hb := a.hits.Load(), b.hits.Load(); ha < 260 || ha > 340 || ha+hb != n {
		t.Errorf("a %d, b %d of %d requests; want about 300 and 100", ha, hb, n)
	}
	if hc := c.hits.Load(); hc != 0 {
		t.Errorf("the failover-only priority got %d requests", hc)
	}
}

// A provider's 429 passed on keeps its Retry-After, on the plain and on
// the protocol path, and one far away tells the SDKs not to retry.
func TestProviderRetryAfterPassedOn(t *testing.T) {
	for _, tc := range []struct {
		name, agent, retryAfter, shouldRetry string
	}{
		{"plain, far", "", "66", "false"},
		{"plain, near", "", "2", ""},
		{"protocol, far", "    response_format: json_standard\n", "66", "false"},
		{"protocol, near", "    response_format: json_standard\n", "2", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &provider{name: "a", answer: status(429, tc.retryAfter)}
			f := newFleet(t, []*provider{a}, fleetOpts{agent: tc.agent})
			_, _, err := f.chat(false)
			var e *openai.Error
			if !errors.As(err, &e) || e.StatusCode != 429 {
				t.Fatalf("got %v, want the provider's 429", err)
			}
			if got := e.Response.Header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			if got := e.Response.Header.Get("X-Should-Retry"); got != tc.shouldRetry {
				t.Errorf("x-should-retry %q, want %q", got, tc.shouldRetry)
			}
		})
	}
}
