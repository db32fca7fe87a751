package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/responses"
	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testredis"
)

// recordingUpstream is an OpenAI-compatible provider that keeps the
// messages of every request and answers what the test says (by default
// "You said: " and the last user message), as JSON or as a stream.
type recordingUpstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	got [][]chatMsg
	say func(lastUser string) string
}

type chatMsg struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls json.RawMessage `json:"tool_calls"`
}

// text is the message's content as one string (text parts joined).
func (m chatMsg) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func newRecordingUpstream(t testing.TB) *recordingUpstream {
	u := &recordingUpstream{say: func(last string) string { return "You said: " + last }}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []chatMsg `json:"messages"`
			Stream   bool      `json:"stream"`
		}
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		last := ""
		for _, m := range req.Messages {
			if m.Role == "user" {
				last = m.text()
			}
		}
		u.mu.Lock()
		u.got = append(u.got, req.Messages)
		answer := u.say(last)
		u.mu.Unlock()
		content, _ := json.Marshal(answer)
		const head = `"id":"chatcmpl-rec","created":1,"model":"rec-1"`
		const usage = `"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{%s,"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],%s}`, head, content, usage)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprintf(w, "data: {%s,\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":%s},\"finish_reason\":null}]}\n\n", head, content)
		_, _ = fmt.Fprintf(w, "data: {%s,\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", head)
		_, _ = fmt.Fprintf(w, "data: {%s,\"object\":\"chat.completion.chunk\",\"choices\":[],%s}\n\ndata: [DONE]\n\n", head, usage)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// last is the messages of the last request the provider got.
func (u *recordingUpstream) last(t testing.TB) []chatMsg {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.got) == 0 {
		t.Fatal("the provider got no request")
	}
	return u.got[len(u.got)-1]
}

func (u *recordingUpstream) calls() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.got)
}

func (u *recordingUpstream) answer(say func(string) string) {
	u.mu.Lock()
	u.say = say
	u.mu.Unlock()
}

// transcript is messages as "role: text" lines, for comparisons.
func transcript(msgs []chatMsg) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Role + ": " + m.text())
		if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" {
			b.WriteString(" " + string(m.ToolCalls))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// respStateGateway is a gateway whose rec-* models go to a recording
// OpenAI-compatible provider, mock-* to the built-in mock and claude-* to
// a native Anthropic provider, with the Responses conversations kept in
// memory or in Redis for ttl.
type respStateGateway struct {
	*a2a
	rec    *recordingUpstream
	claude *fakeAnthropic
}

func newRespStateGateway(t *testing.T, redisURL, ttl string) *respStateGateway {
	t.Helper()
	dir := t.TempDir()
	rec := newRecordingUpstream(t)
	claude := newFakeAnthropic(t)
	state := ""
	if redisURL != "" {
		state = "state:\n  backend: redis\n" + redisYAML(redisURL) + "  timeout: 1s\n"
	}
	gw := `listen: "127.0.0.1:0"
upstreams:
  - {name: rec, type: openai, base_url: ` + rec.srv.URL + `/v1, api_key: sk-provider, max_retries: 0, models: ["rec-*"]}
  - {name: mock, type: mock, models: ["mock-*"]}
  - {name: claude, type: anthropic, base_url: ` + claude.srv.URL + `/v1, api_key: ` + anthropicKey + `, max_retries: 0, models: ["claude-*"]}
policy:
  dir: ` + policyDir(a2aOpts{}) + `
audit:
  dir: ` + filepath.Join(dir, "audit") + `
  chain: resp
  fail_mode: closed
responses:
  store_ttl: ` + ttl + `
` + state
	agents := "agents:\n"
	for _, id := range []string{"alice", "bob"} {
		agents += "  " + id + ":\n    type: coder\n    token_sha256: \"" + roster.HashTokenHex("tok-"+id) + "\"\n"
	}
	protocol := "protocol:\n  redaction:\n    detectors: [email]\n"
	cfg, a, auditLog := buildFromFiles(t, dir, map[string]string{config.GatewayFile: gw, config.AgentsFile: agents, config.ProtocolFile: protocol})
	srv := httptest.NewServer(a.server.Handler())
	t.Cleanup(func() {
		srv.Close()
		a.Close()
		auditLog.Close()
	})
	return &respStateGateway{a2a: &a2a{t: t, srv: srv, app: a, auditDir: filepath.Join(dir, "audit"), dir: dir, cfg: cfg}, rec: rec, claude: claude}
}

func (g *respStateGateway) client(agent string) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.srv.URL+"/v1"), option.WithAPIKey("tok-"+agent), option.WithMaxRetries(0))
}

// kept is the response's store member (which the SDK's type does not
// have): whether the gateway kept it.
func kept(r *responses.Response) bool {
	var m struct {
		Store bool `json:"store"`
	}
	_ = json.Unmarshal([]byte(r.RawJSON()), &m)
	return m.Store
}

func text(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
}

// notFound reports whether err is OpenAI's 404 for a response that is not
// kept, naming id.
func notFound(err error, id string) bool {
	var apiErr *openai.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound && apiErr.Code == "previous_response_not_found" &&
		apiErr.Param == "previous_response_id" && strings.HasPrefix(apiErr.Message, "Previous response with id '"+id+"' not found.")
}

// TestResponsesPreviousResponseID: the official client continues a
// conversation with previous_response_id against the real gateway, on
// either state backend: the provider sees the whole conversation (the
// first turn's input and answer, not its instructions), whatever the
// provider (OpenAI-compatible, the mock, native Anthropic); a response is
// its agent's only; store: false keeps nothing; a streamed turn is kept
// as a JSON one; what is kept is the answer as the client got it
// (redacted); the audit trail names the response continued.
func TestResponsesPreviousResponseID(t *testing.T) {
	for _, backend := range []string{"memory", "redis", "cluster"} {
		t.Run(backend, func(t *testing.T) {
			url := ""
			var rc redis.UniversalClient // another client of the gateway's Redis
			switch backend {
			case "redis":
				srv := testredis.Start(t)
				url, rc = srv.URL(), srv.Client(t)
			case "cluster":
				c := testredis.StartCluster(t)
				url, rc = clusterYAML(c), c.Client(t)
			}
			g := newRespStateGateway(t, url, "1h")
			ctx := context.Background()
			alice, bob := g.client("alice"), g.client("bob")

			first, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "rec-1",
				Instructions: openai.String("Answer in haiku."), Input: text("My name is Ann.")})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(first.ID, "resp_") || !kept(first) {
				t.Fatalf("first response %s store %v", first.ID, kept(first))
			}
			if url != "" {
				// Kept in Redis, under the agent's key, with the TTL.
				if ttl, err := rc.PTTL(ctx, "gw:resp:alice:"+first.ID).Result(); err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
					t.Errorf("PTTL of gw:resp:alice:%s: %v %v", first.ID, ttl, err)
				}
			}

			t.Run("second turn sees the first", func(t *testing.T) {
				second, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "rec-1",
					Instructions: openai.String("Be brief."), PreviousResponseID: openai.String(first.ID), Input: text("What is my name?")})
				if err != nil {
					t.Fatal(err)
				}
				const want = "system: Be brief.\nuser: My name is Ann.\nassistant: You said: My name is Ann.\nuser: What is my name?\n"
				if got := transcript(g.rec.last(t)); got != want {
					t.Errorf("the provider got\n%s\nwant\n%s", got, want)
				}
				if second.PreviousResponseID != first.ID || second.ID == first.ID {
					t.Errorf("second %s continues %q", second.ID, second.PreviousResponseID)
				}
				// A third turn continues the second: the whole chain, each
				// turn's instructions its own.
				if _, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "rec-1",
					PreviousResponseID: openai.String(second.ID), Input: text("Thanks.")}); err != nil {
					t.Fatal(err)
				}
				const want3 = "user: My name is Ann.\nassistant: You said: My name is Ann.\nuser: What is my name?\nassistant: You said: What is my name?\nuser: Thanks.\n"
				if got := transcript(g.rec.last(t)); got != want3 {
					t.Errorf("third turn: the provider got\n%s\nwant\n%s", got, want3)
				}
			})

			t.Run("another agent", func(t *testing.T) {
				before := g.rec.calls()
				_, err := bob.Responses.New(ctx, responses.ResponseNewParams{Model: "rec-1", PreviousResponseID: openai.String(first.ID), Input: text("Whose?")})
				if !notFound(err, first.ID) {
					t.Errorf("bob continuing alice's response: %v, want 404", err)
				}
				if g.rec.calls() != before {
					t.Error("the provider was called for a refused continuation")
				}
			})

			t.Run("store false", func(t *testing.T) {
				unkept, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "rec-1", Store: openai.Bool(false),
					PreviousResponseID: openai.String(first.ID), Input: text("Off the record.")})
				if err != nil {
					t.Fatal(err)
				}
				if kept(unkept) || !strings.Contains(transcript(g.rec.last(t)), "user: My name is Ann.") {
					t.Errorf("store %v; a store: false request may still continue: the provider got %s", kept(unkept), transcript(g.rec.last(t)))
				}
				_, err = alice.Responses.New(ctx, responses.ResponseNewParams{Model: "rec-1", PreviousResponseID: openai.String(unkept.ID), Input: text("And?")})
				if !notFound(err, unkept.ID) {
					t.Errorf("continuing a store: false response: %v, want 404", err)
				}
			})

			t.Run("streamed first turn", func(t *testing.T) {
				stream := alice.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "rec-1", Input: text("Streamed hello.")})
				var done responses.Response
				for stream.Next() {
					if ev := stream.Current(); ev.Type == "response.completed" {
						done = ev.AsResponseCompleted().Response
					}
				}
				if err := stream.Err(); err != nil || done.ID == "" || !kept(&done) {
					t.Fatalf("stream: %v, completed %s store %v", err, done.ID, kept(&done))
				}
				if _, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "rec-1", PreviousResponseID: openai.String(done.ID), Input: text("Next.")}); err != nil {
					t.Fatal(err)
				}
				if got := transcript(g.rec.last(t)); got != "user: Streamed hello.\nassistant: You said: Streamed hello.\nuser: Next.\n" {
					t.Errorf("the provider got\n%s", got)
				}
			})

			t.Run("redacted answer kept redacted", func(t *testing.T) {
				g.rec.answer(func(string) string { return "Write to carol@example.com." })
				defer g.rec.answer(func(last string) string { return "You said: " + last })
				r1, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "rec-1", Input: text("Whom do I write to?")})
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(r1.OutputText(), "carol@") || !strings.Contains(r1.OutputText(), "[REDACTED:email]") {
					t.Fatalf("answer %q", r1.OutputText())
				}
				if _, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "rec-1", PreviousResponseID: openai.String(r1.ID), Input: text("Say it again.")}); err != nil {
					t.Fatal(err)
				}
				got := transcript(g.rec.last(t))
				if strings.Contains(got, "carol@") || !strings.Contains(got, "assistant: Write to [REDACTED:email].") {
					t.Errorf("the provider got\n%s\nwant the kept answer redacted", got)
				}
			})

			t.Run("mock provider", func(t *testing.T) {
				r1, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "mock-1", Input: text("Remember the word heron.")})
				if err != nil {
					t.Fatal(err)
				}
				r2, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "mock-1", PreviousResponseID: openai.String(r1.ID), Input: text("Which word?")})
				if err != nil {
					t.Fatal(err)
				}
				// The mock echoes the last user message: the new input, not
				// the kept one, with the kept turns before it.
				if !strings.Contains(r2.OutputText(), "Which word?") || r2.Usage.InputTokens <= r1.Usage.InputTokens {
					t.Errorf("second answer %q, input tokens %d after %d: want the longer conversation", r2.OutputText(), r2.Usage.InputTokens, r1.Usage.InputTokens)
				}
			})

			t.Run("native anthropic tool loop", func(t *testing.T) {
				g.claude.set(func(map[string]any) (int, string, string) {
					return 200, "application/json", recorded(t, "tool_call.answer.json")
				})
				tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
					Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}
				r1, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "claude-3-7-sonnet-latest", Tools: tools,
					Input: text("What's the weather in San Francisco?")})
				if err != nil {
					t.Fatal(err)
				}
				var callID string
				for _, it := range r1.Output {
					if it.Type == "function_call" {
						callID = it.CallID
					}
				}
				if callID == "" {
					t.Fatalf("no function call in %+v", r1.Output)
				}
				g.claude.set(func(map[string]any) (int, string, string) {
					return 200, "application/json", recorded(t, "tool_result.answer.json")
				})
				// What the OpenAI Agents SDK does: the tool's output alone,
				// the rest by previous_response_id.
				_, err = alice.Responses.New(ctx, responses.ResponseNewParams{Model: "claude-3-7-sonnet-latest", Tools: tools,
					PreviousResponseID: openai.String(r1.ID),
					Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
						responses.ResponseInputItemParamOfFunctionCallOutput(callID, `{"temp_f":64}`)}}})
				if err != nil {
					t.Fatal(err)
				}
				reqs := g.claude.requests()
				msgs, _ := reqs[len(reqs)-1].body["messages"].([]any)
				raw, _ := json.Marshal(msgs)
				if len(msgs) != 3 || !strings.Contains(string(raw), `"type":"tool_use"`) || !strings.Contains(string(raw), `"tool_use_id":"`+callID+`"`) ||
					!strings.Contains(string(raw), "San Francisco?") {
					t.Errorf("Anthropic got %s: want the question, the tool_use and its tool_result", raw)
				}
			})

			t.Run("audit", func(t *testing.T) {
				var continued, stored, notStored int
				for _, e := range g.entries(audit.KindLLMRequest) {
					if summaryOf(e)["previous_response_id"] == first.ID && e.AgentID == "alice" {
						continued++
					}
				}
				for _, e := range g.entries(audit.KindLLMResponse) {
					switch summaryOf(e)["stored"] {
					case true:
						stored++
					case false:
						notStored++
					}
				}
				// Continuing first: the second turn, store: false (alice);
				// bob's refusal names it too, as bob's.
				if continued != 2 || stored != 11 || notStored != 1 {
					t.Errorf("llm.request entries continuing %s: %d; llm.response stored: %d, not stored: %d", first.ID, continued, stored, notStored)
				}
			})
		})
	}
}

// TestResponsesPreviousResponseExpires: a kept conversation is forgotten
// after responses.store_ttl, on either backend.
func TestResponsesPreviousResponseExpires(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			url := ""
			if backend == "redis" {
				url = testredis.Start(t).URL()
			}
			g := newRespStateGateway(t, url, "400ms")
			ctx := context.Background()
			alice := g.client("alice")
			r1, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "rec-1", Input: text("Short-lived.")})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "rec-1", PreviousResponseID: openai.String(r1.ID), Input: text("Still there?")}); err != nil {
				t.Fatalf("within the TTL: %v", err)
			}
			time.Sleep(600 * time.Millisecond)
			_, err = alice.Responses.New(ctx, responses.ResponseNewParams{Model: "rec-1", PreviousResponseID: openai.String(r1.ID), Input: text("Now?")})
			if !notFound(err, r1.ID) {
				t.Errorf("after the TTL: %v, want 404", err)
			}
		})
	}
}
