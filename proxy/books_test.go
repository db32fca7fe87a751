package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/proxy"
)

// The books: every answer's usage is read strictly and every stream is
// priced, whatever the agent's limits.

// usageUpstream answers chat completions as OpenAI does, with usage u: in
// a stream only when the request asked for it (stream_options.include_usage,
// the other chunks then carrying "usage": null). It remembers the bodies it
// received.
type usageUpstream struct {
	u       string
	content string // the answer's text; "ok" when empty
	// beside: the usage comes in the last chunk, beside its choices, not
	// in a chunk of its own (as some OpenAI-compatible providers send it).
	beside bool
	mu     sync.Mutex
	bodies []string
}

func (up *usageUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	up.mu.Lock()
	up.bodies = append(up.bodies, string(b))
	up.mu.Unlock()
	var req struct {
		Stream        bool `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(b, &req)
	content, _ := json.Marshal(up.text())
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":%s}`, content, up.u)
		return
	}
	asked := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	null, last := "", ""
	if asked {
		null, last = `,"usage":null`, `,"usage":null`
		if up.beside {
			last = `,"usage":` + up.u
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":%s},\"finish_reason\":null}]%s}\n\n", content, null)
	_, _ = fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]%s}\n\n", last)
	if asked && !up.beside {
		_, _ = fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":%s}\n\n", up.u)
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

func (up *usageUpstream) text() string {
	if up.content == "" {
		return "ok"
	}
	return up.content
}

// last is the last body the upstream received.
func (up *usageUpstream) last() string {
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.bodies) == 0 {
		return ""
	}
	return up.bodies[len(up.bodies)-1]
}

// chat sends body as the agent of token to gw's chat completions.
func chat(gw *proxy.Gateway, token, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	gw.ChatCompletions().ServeHTTP(w, scope.Attach(r, &scope.Exchange{RequestID: "req-1", Start: time.Now()}))
	return w
}

// books is a gateway of costAgents on up, with its budget calls and spend
// recorded.
func books(t *testing.T, up http.Handler) (*proxy.Gateway, *bookParts) {
	t.Helper()
	p := &bookParts{budget: &recBudget{Budget: limit.NewMemoryBudget()}, spend: proxy.NewSpend()}
	gw, trail := newCostGateway(t, up.ServeHTTP, func(d *proxy.Deps) { d.Tokens, d.Spend = p.budget, p.spend })
	p.trail = trail
	return gw, p
}

type bookParts struct {
	budget *recBudget
	spend  *proxy.Spend
	trail  interface {
		Last(kind string) map[string]any
	}
}

const goodUsage = `{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}`

// A stream of an agent without a budget or a token limit is priced: the
// gateway asks the provider for its usage, charges it (the audit entry,
// the spend metric) and the client, which did not ask, gets no usage
// chunk.
func TestStreamPricedWithoutBudget(t *testing.T) {
	up := &usageUpstream{u: goodUsage}
	gw, p := books(t, up)
	w := chat(gw, "tok-free", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != http.StatusOK || !strings.HasSuffix(w.Body.String(), "data: [DONE]\n\n") {
		t.Fatalf("%d %q", w.Code, w.Body)
	}
	if !strings.Contains(up.last(), `"stream_options":{"include_usage":true}`) {
		t.Errorf("the upstream was not asked for the stream's usage: %s", up.last())
	}
	if body := w.Body.String(); strings.Contains(body, "prompt_tokens") || strings.Contains(body, `"choices":[]`) {
		t.Errorf("a client that did not ask got the usage chunk: %q", body)
	}
	resp := p.trail.Last("llm.response")
	cost, _ := resp["cost"].(map[string]any)
	tokens, _ := resp["tokens"].(map[string]any)
	// 5 × 0.15 + 7 × 0.60 = 4.95 µ$, rounded up.
	if cost["priced"] != true || cost["micro_usd"] != 5 || tokens["total"] != 12 {
		t.Errorf("llm.response cost %v, tokens %v", cost, tokens)
	}
	if got := p.spend.MicroUSD("free"); got != 5 {
		t.Errorf("gateway_spend_usd_total{agent=free} = %d µ$, want 5", got)
	}
}

// A client that asked for the usage gets the provider's usage chunk, and
// its request goes upstream byte for byte.
func TestStreamUsageAskedByClient(t *testing.T) {
	up := &usageUpstream{u: goodUsage}
	gw, p := books(t, up)
	body := `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	w := chat(gw, "tok-free", body)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %q", w.Code, w.Body)
	}
	if up.last() != body {
		t.Errorf("upstream got %s, want %s", up.last(), body)
	}
	want := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":` + goodUsage + "}\n\n"
	if !strings.Contains(w.Body.String(), want) {
		t.Errorf("the usage chunk did not reach the client that asked:\n%s", w.Body)
	}
	if got := p.spend.MicroUSD("free"); got != 5 {
		t.Errorf("spend %d µ$, want 5", got)
	}
}

// A usage report that cannot be believed is an unreadable answer for the
// books: the answer is delivered (the provider did the work and its
// content passed every check), a budget's reservation stays spent whole,
// no tokens are written to the trail, and the entry says why.
func TestUnreadableUsage(t *testing.T) {
	reports := []struct{ name, usage, reason string }{
		{"negative", `{"prompt_tokens":-100000,"completion_tokens":5,"total_tokens":-99995}`, "prompt_tokens is negative"},
		{"fraction", `{"prompt_tokens":10.5,"completion_tokens":5,"total_tokens":15.5}`, "prompt_tokens is not an integer"},
		{"exponent", `{"prompt_tokens":1e3,"completion_tokens":5}`, "prompt_tokens is not an integer"},
		{"inconsistent total", `{"prompt_tokens":5000,"completion_tokens":7000,"total_tokens":12}`, "total_tokens is not prompt_tokens + completion_tokens"},
		{"cached over prompt", `{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":6}}`, "cached_tokens is more than prompt_tokens"},
		{"cached negative", `{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":-5}}`, "cached_tokens is negative"},
	}
	for _, rep := range reports {
		for _, stream := range []bool{false, true} {
			for _, agent := range []string{"free", "budgeted"} {
				t.Run(fmt.Sprintf("%s/stream=%v/%s", rep.name, stream, agent), func(t *testing.T) {
					up := &usageUpstream{u: rep.usage}
					gw, p := books(t, up)
					w := chat(gw, "tok-"+agent, fmt.Sprintf(`{"model":"gpt-4o-mini","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream))
					if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"content":"ok"`) {
						t.Fatalf("the answer was not delivered: %d %q", w.Code, w.Body)
					}
					if stream && strings.Contains(w.Body.String(), `"choices":[]`) {
						t.Errorf("a client that did not ask got the usage chunk: %q", w.Body)
					}
					checkUnreadable(t, p, agent, rep.reason)
				})
			}
		}
	}
}

// checkUnreadable checks the books of one exchange whose usage report was
// unreadable for reason.
func checkUnreadable(t *testing.T, p *bookParts, agent, reason string) {
	t.Helper()
	resp := p.trail.Last("llm.response")
	if _, ok := resp["tokens"]; ok {
		t.Errorf("tokens written to the trail: %v", resp["tokens"])
	}
	cost, _ := resp["cost"].(map[string]any)
	if cost["priced"] != false || cost["reason"] != "unreadable_usage" || cost["usage_error"] != reason {
		t.Errorf("cost %v, want unpriced, unreadable_usage, %q", cost, reason)
	}
	if got := unpricedCount(t, p.spend, agent, "unreadable_usage"); got != 1 {
		t.Errorf("gateway_spend_unpriced_total{reason=unreadable_usage} = %v", got)
	}
	if got := p.spend.MicroUSD(agent); got != 0 {
		t.Errorf("spend %d µ$, want none counted", got)
	}
	if agent == "free" {
		return
	}
	reserved, _ := cost["reserved_micro_usd"].(int)
	want := fmt.Sprintf("settle usd:%s %d->%d", agent, reserved, reserved)
	if ops := p.budget.calls(); reserved <= 0 || len(ops) != 2 || ops[1] != want {
		t.Errorf("budget calls %q, want the reservation kept whole (%s)", ops, want)
	}
}

// The protocol path reads its answers' usage with the same reader: an
// unreadable report of any attempt keeps the reservation whole, and the
// validated answer it renders carries no usage it cannot vouch for.
func TestUnreadableUsageProtocol(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			up := &usageUpstream{u: `{"prompt_tokens":-100000,"completion_tokens":5}`,
				content: `{"thought":"t","status":"success","data":{},"message":"done"}`}
			gw, p := books(t, up)
			w := chat(gw, "tok-sacp", fmt.Sprintf(`{"model":"gpt-4o-mini","stream":%v,"stream_options":{"include_usage":%v},"messages":[{"role":"user","content":"hi"}]}`, stream, stream))
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "done") || w.Header().Get("X-SACP-Valid") != "true" {
				t.Fatalf("%d %v %q", w.Code, w.Header(), w.Body)
			}
			if strings.Contains(w.Body.String(), "prompt_tokens") {
				t.Errorf("the rendered answer vouches for an unreadable usage: %q", w.Body)
			}
			checkUnreadable(t, p, "sacp", "prompt_tokens is negative")
		})
	}
}

// direct is what up answers body with no gateway in between.
func direct(up http.Handler, body string) string {
	w := httptest.NewRecorder()
	up.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
	return w.Body.String()
}

// A client that did not ask for the stream's usage gets, byte for byte,
// the stream the provider would have sent it had the gateway not asked:
// no "usage": null in its chunks, no usage beside the last choices (and
// with redaction on, which re-frames held-back text, no usage member
// either). The books still have the usage. A client that asked gets the
// provider's stream as it was.
func TestStreamUsageMembersHidden(t *testing.T) {
	plain := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	asked := `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	noRedaction := func(d *proxy.Deps) { d.Config.Protocol.Redaction.Detectors = nil }
	for _, redacting := range []bool{false, true} {
		for _, beside := range []bool{false, true} {
			for _, body := range []string{plain, asked} {
				up := &usageUpstream{u: goodUsage, beside: beside}
				p := &bookParts{budget: &recBudget{Budget: limit.NewMemoryBudget()}, spend: proxy.NewSpend()}
				opts := []func(*proxy.Deps){func(d *proxy.Deps) { d.Tokens, d.Spend = p.budget, p.spend }}
				if !redacting {
					opts = append(opts, noRedaction)
				}
				gw, trail := newCostGateway(t, up.ServeHTTP, opts...)
				w := chat(gw, "tok-free", body)
				got := w.Body.String()
				if want := direct(up, body); w.Code != http.StatusOK || (!redacting && got != want) {
					t.Errorf("redacting %v, beside %v, asked %v: the client got\n%s\nwant what the provider sends it\n%s", redacting, beside, body == asked, got, want)
				}
				if body == plain && strings.Contains(got, "usage") {
					t.Errorf("redacting %v, beside %v: a client that did not ask got a usage member: %q", redacting, beside, got)
				}
				if body == asked && !strings.Contains(got, goodUsage) {
					t.Errorf("redacting %v, beside %v: the client that asked got no usage: %q", redacting, beside, got)
				}
				cost, _ := trail.Last("llm.response")["cost"].(map[string]any)
				if cost["priced"] != true || cost["micro_usd"] != 5 || p.spend.MicroUSD("free") != 5 {
					t.Errorf("redacting %v, beside %v, asked %v: cost %v, spend %d µ$; want priced at 5 µ$", redacting, beside, body == asked, cost, p.spend.MicroUSD("free"))
				}
			}
		}
	}
}

// toolCallUpstream streams a tool-call turn as OpenAI does, usage asked
// for or not: "usage": null in each chunk then, and (as some providers
// send it) the usage beside the last choices.
func toolCallUpstream(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	asked := strings.Contains(string(b), `"include_usage":true`)
	null, last := "", ""
	if asked {
		null, last = `,"usage":null`, `,"usage":`+goodUsage
	}
	const head = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,`
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, head+`"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{}"}}]},"finish_reason":null}]`+null+"}\n\n")
	_, _ = io.WriteString(w, head+`"delta":{},"finish_reason":"tool_calls"}]`+last+"}\n\n")
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// The protocol path passes a streamed tool-call turn on as it came: a
// client that did not ask for the usage gets no usage member in it; one
// that asked gets the provider's.
func TestStreamUsageHiddenInToolTurn(t *testing.T) {
	for _, ask := range []bool{false, true} {
		gw, _ := newCostGateway(t, toolCallUpstream)
		opts := ""
		if ask {
			opts = `"stream_options":{"include_usage":true},`
		}
		w := chat(gw, "tok-sacp", `{"model":"gpt-4o-mini","stream":true,`+opts+`"messages":[{"role":"user","content":"hi"}]}`)
		got := w.Body.String()
		if w.Code != http.StatusOK || !strings.Contains(got, `"finish_reason":"tool_calls"`) || !strings.HasSuffix(got, "data: [DONE]\n\n") {
			t.Fatalf("ask %v: %d %q", ask, w.Code, got)
		}
		if !ask && strings.Contains(got, "usage") {
			t.Errorf("a client that did not ask got a usage member: %q", got)
		}
		if ask && !strings.Contains(got, `"usage":`+goodUsage) {
			t.Errorf("the client that asked got no usage: %q", got)
		}
	}
}
