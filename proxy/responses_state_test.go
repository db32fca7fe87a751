package proxy_test

import (
	"context"
	"encoding/json"

	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/upstream"
)

// respGateway drives the Responses chain of a Gateway directly, with an
// OpenAI-compatible provider that records the messages it gets and a
// ResponseState of the test's.
type respGateway struct {
	t     *testing.T
	gw    *proxy.Gateway
	trail *testkit.Trail
	state *proxy.ResponseState

	mu     sync.Mutex
	got    []string // the message lists the provider got, as JSON
	answer func(stream bool) (int, string, string)
}

func newRespGateway(t *testing.T, store proxy.ResponseStore, gatewayExtra string) *respGateway {
	t.Helper()
	g := &respGateway{t: t, trail: &testkit.Trail{}, state: proxy.NewResponseState(store)}
	g.answer = func(stream bool) (int, string, string) {
		if stream {
			return 200, "text/event-stream", `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
		}
		return 200, "application/json", `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages json.RawMessage `json:"messages"`
			Stream   bool            `json:"stream"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		g.mu.Lock()
		g.got = append(g.got, string(body.Messages))
		answer := g.answer
		g.mu.Unlock()
		status, ctype, out := answer(body.Stream)
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, out)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	files := map[string]string{
		config.GatewayFile: `listen: "127.0.0.1:0"
upstreams:
  - {name: test, type: openai, base_url: ` + srv.URL + `/v1, api_key: sk-provider, max_retries: 0, models: ["*"]}
audit: {dir: ` + filepath.Join(dir, "audit") + `, chain: t, fail_mode: closed}
` + gatewayExtra,
		config.AgentsFile: "agents:\n  alice:\n    type: coder\n    token_sha256: \"" + roster.HashTokenHex("tok-alice") + "\"\n" +
			"  bob:\n    type: coder\n    token_sha256: \"" + roster.HashTokenHex("tok-bob") + "\"\n",
		config.ProtocolFile: "protocol:\n  redaction:\n    detectors: [email]\n",
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
	g.gw, err = proxy.New(proxy.Deps{Config: cfg, Upstreams: ups, Requests: limit.NewMemory(), Tokens: limit.NewMemoryBudget(),
		Log: log, Audit: door.NewRecorder(g.trail, cfg.Gateway.Audit, log), KeepAlive: time.Hour, Responses: g.state})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// post sends one Responses request as agent (token "tok-"+agent).
func (g *respGateway) post(agent, body string) (*httptest.ResponseRecorder, map[string]any) {
	g.t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer tok-"+agent)
	w := httptest.NewRecorder()
	g.gw.Responses().ServeHTTP(w, scope.Attach(r, &scope.Exchange{RequestID: "req-" + agent, Start: time.Now()}))
	var out map[string]any
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			g.t.Fatalf("%d %s: %v", w.Code, w.Body, err)
		}
	}
	return w, out
}

// provider is the number of calls the provider got and the last messages.
func (g *respGateway) provider() (int, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.got) == 0 {
		return 0, ""
	}
	return len(g.got), g.got[len(g.got)-1]
}

// hookStore is a store whose calls can fail, counting them.
type hookStore struct {
	proxy.ResponseStore
	mu             sync.Mutex
	getErr, putErr error
	gets, puts     int
	put            []byte // the last value put
}

func (s *hookStore) Get(ctx context.Context, agent, id string) ([]byte, error) {
	s.mu.Lock()
	s.gets++
	err := s.getErr
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.ResponseStore.Get(ctx, agent, id)
}

func (s *hookStore) Put(ctx context.Context, agent, id string, conv []byte, ttl time.Duration) error {
	s.mu.Lock()
	s.puts++
	s.put = append([]byte(nil), conv...)
	err := s.putErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.ResponseStore.Put(ctx, agent, id, conv, ttl)
}

func (s *hookStore) set(getErr, putErr error) {
	s.mu.Lock()
	s.getErr, s.putErr = getErr, putErr
	s.mu.Unlock()
}

func newHookStore() *hookStore {
	return &hookStore{ResponseStore: proxy.NewMemoryResponseStore(proxy.MemoryResponseStoreOptions{})}
}

func errorOf(out map[string]any) (code, typ, param, msg string) {
	e, _ := out["error"].(map[string]any)
	s := func(k string) string { v, _ := e[k].(string); return v }
	return s("code"), s("type"), s("param"), s("message")
}

// TestResponsesContinuationAudit: the llm.request entry of a continued
// response names the response it continues, the llm.response entry says
// whether the response is kept, for JSON and streams, stored or not.
func TestResponsesContinuationAudit(t *testing.T) {
	g := newRespGateway(t, newHookStore(), "")
	w, first := g.post("alice", `{"model":"m","input":"One"}`)
	if w.Code != 200 || first["store"] != true {
		t.Fatalf("%d %v", w.Code, first)
	}
	resp := g.trail.Last(audit.KindLLMResponse)
	if resp["stored"] != true {
		t.Errorf("llm.response %v: want stored true", resp)
	}
	if _, ok := g.trail.Last(audit.KindLLMRequest)["previous_response_id"]; ok {
		t.Error("a first turn's llm.request names a previous response")
	}
	id := first["id"].(string)
	for _, tc := range []struct {
		name, body string
		stored     bool
	}{
		{"json", `{"model":"m","previous_response_id":"` + id + `","input":"Two"}`, true},
		{"stream", `{"model":"m","previous_response_id":"` + id + `","input":"Two","stream":true}`, true},
		{"store false", `{"model":"m","previous_response_id":"` + id + `","input":"Two","store":false}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := g.post("alice", tc.body)
			if w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if req := g.trail.Last(audit.KindLLMRequest); req["previous_response_id"] != id || req["dialect"] != "responses" {
				t.Errorf("llm.request %v: want previous_response_id %s", req, id)
			}
			if resp := g.trail.Last(audit.KindLLMResponse); resp["stored"] != tc.stored {
				t.Errorf("llm.response %v: want stored %v", resp, tc.stored)
			}
			if _, got := g.provider(); !strings.Contains(got, `"One"`) || !strings.Contains(got, `"Two"`) {
				t.Errorf("the provider got %s", got)
			}
		})
	}
	t.Run("provider error", func(t *testing.T) {
		g.mu.Lock()
		g.answer = func(bool) (int, string, string) {
			return 400, "application/json", `{"error":{"message":"bad","type":"invalid_request_error","code":null,"param":null}}`
		}
		g.mu.Unlock()
		w, _ := g.post("alice", `{"model":"m","previous_response_id":"`+id+`","input":"Two"}`)
		if w.Code != 400 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if resp := g.trail.Last(audit.KindLLMResponse); resp["stored"] != false {
			t.Errorf("llm.response of a provider error %v: want stored false", resp)
		}
	})
	t.Run("refused continuation", func(t *testing.T) {
		const unknown = "resp_00000000000000000000000000000000"
		w, _ := g.post("bob", `{"model":"m","previous_response_id":"`+unknown+`","input":"Two"}`)
		if w.Code != 404 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if req := g.trail.Last(audit.KindLLMRequest); req["previous_response_id"] != unknown || req["status"] != 404 ||
			req["error_code"] != "previous_response_not_found" || req["model"] != "m" {
			t.Errorf("llm.request of the refusal %v", req)
		}
	})
}

// TestResponsesStateFailures: the state backend fails closed when a
// request needs it (503, the provider never called), and a response that
// cannot be kept is served all the same, saying store: false, counted,
// and not found later.
func TestResponsesStateFailures(t *testing.T) {
	down := fmt.Errorf("%w: connection refused", apierror.ErrStateUnavailable)

	t.Run("load fails", func(t *testing.T) {
		st := newHookStore()
		g := newRespGateway(t, st, "")
		_, first := g.post("alice", `{"model":"m","input":"One"}`)
		st.set(down, nil)
		w, out := g.post("alice", `{"model":"m","previous_response_id":"`+first["id"].(string)+`","input":"Two"}`)
		if code, typ, _, _ := errorOf(out); w.Code != 503 || code != "state_unavailable" || typ != "server_error" || w.Header().Get("Retry-After") != "1" {
			t.Errorf("%d %v %v", w.Code, w.Header(), out)
		}
		if n, _ := g.provider(); n != 1 {
			t.Errorf("the provider was called %d times, want once (turn 1)", n)
		}
		// A request that continues nothing does not need the backend.
		if w, _ := g.post("alice", `{"model":"m","input":"Three"}`); w.Code != 200 {
			t.Errorf("a first turn with the backend down: %d", w.Code)
		}
	})

	t.Run("keep fails", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			st := newHookStore()
			g := newRespGateway(t, st, "")
			st.set(nil, down)
			w, out := g.post("alice", fmt.Sprintf(`{"model":"m","input":"One","stream":%v}`, stream))
			if w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			var id string
			if stream {
				final := lastEvent(t, w.Body.String())
				if final["type"] != "response.completed" || final["response"].(map[string]any)["store"] != false {
					t.Errorf("final event %v: want response.completed with store false", final)
				}
				id = final["response"].(map[string]any)["id"].(string)
			} else {
				if out["store"] != false {
					t.Errorf("response %v: want store false", out)
				}
				id = out["id"].(string)
			}
			if g.state.StoreFailures() != 1 {
				t.Errorf("%d failures counted", g.state.StoreFailures())
			}
			st.set(nil, nil)
			if w, out := g.post("alice", `{"model":"m","previous_response_id":"`+id+`","input":"Two"}`); w.Code != 404 {
				t.Errorf("continuing a response not kept: %d %v", w.Code, out)
			}
		}
	})

	t.Run("kept value unreadable", func(t *testing.T) {
		st := newHookStore()
		g := newRespGateway(t, st, "")
		const id = "resp_0123456789abcdef0123456789abcdef"
		_ = st.Put(context.Background(), "alice", id, []byte(`{"messages":[{"role":"root","content":"x"}]}`), time.Hour)
		w, out := g.post("alice", `{"model":"m","previous_response_id":"`+id+`","input":"Two"}`)
		if code, _, _, msg := errorOf(out); w.Code != 500 || code != "internal_error" || strings.Contains(msg, "root") {
			t.Errorf("%d %v", w.Code, out)
		}
		if n, _ := g.provider(); n != 0 {
			t.Error("the provider was called")
		}
	})

	t.Run("ids not the gateway's are not looked up", func(t *testing.T) {
		st := newHookStore()
		g := newRespGateway(t, st, "")
		for _, id := range []string{"resp_123", "resp_0123456789ABCDEF0123456789ABCDEF", "x:resp_0123456789abcdef0123456789abcdef", strings.Repeat("r", 500)} {
			w, out := g.post("alice", `{"model":"m","previous_response_id":"`+id+`","input":"Two"}`)
			code, typ, param, msg := errorOf(out)
			if w.Code != 404 || code != "previous_response_not_found" || typ != "invalid_request_error" || param != "previous_response_id" ||
				!strings.HasPrefix(msg, "Previous response with id '") || len(msg) > 200 {
				t.Errorf("%q: %d %v", id, w.Code, out)
			}
		}
		if st.gets != 0 {
			t.Errorf("%d lookups of ids the gateway never gives", st.gets)
		}
	})

	t.Run("too large", func(t *testing.T) {
		st := newHookStore()
		g := newRespGateway(t, st, "responses: {max_stored_size: 100B}\n")
		w, first := g.post("alice", `{"model":"m","input":"`+strings.Repeat("long ", 30)+`"}`)
		if w.Code != 200 || first["store"] != false || g.state.TooLarge() != 1 {
			t.Fatalf("%d %v; %d too large", w.Code, first, g.state.TooLarge())
		}
		if string(st.put) != "too_large" {
			t.Errorf("kept %q, want the marker", st.put)
		}
		w, out := g.post("alice", `{"model":"m","previous_response_id":"`+first["id"].(string)+`","input":"Two"}`)
		if code, _, _, msg := errorOf(out); w.Code != 404 || code != "previous_response_not_found" || !strings.Contains(msg, "max_stored_size") {
			t.Errorf("%d %v", w.Code, out)
		}
		// A short one is kept.
		if _, small := g.post("alice", `{"model":"m","input":"Hi"}`); small["store"] != true {
			t.Errorf("a small conversation: %v", small)
		}
	})
}

// lastEvent is the data of a Responses stream's last event.
func lastEvent(t *testing.T, stream string) map[string]any {
	t.Helper()
	events := strings.Split(strings.TrimSpace(stream), "\n\n")
	_, data, ok := strings.Cut(events[len(events)-1], "\ndata: ")
	var ev map[string]any
	if !ok || json.Unmarshal([]byte(data), &ev) != nil {
		t.Fatalf("stream %s", stream)
	}
	return ev
}
