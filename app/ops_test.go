package app

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/approval"
	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/workflow"
	"github.com/sacpgw/gateway/workflow/definition"
)

// The operator page of a gateway built by Build: the use it shows is what
// the OpenAI front door spent (the limit keys agree), the refusals are
// read back from the trail the front door wrote, the chain's end checks,
// and the policy revision is the engine's.
func TestOpsSourceReadsWhatTheProxySpends(t *testing.T) {
	dir := t.TempDir()
	rego, err := filepath.Abs("../rego")
	if err != nil {
		t.Fatal(err)
	}
	_, a, auditLog := buildFromFiles(t, dir, map[string]string{
		config.GatewayFile: `listen: "127.0.0.1:0"
admin:
  token_sha256: "` + roster.HashTokenHex("tok-admin") + `"
  reviewers:
    - name: security-lead
      token_sha256: "` + roster.HashTokenHex("tok-reviewer") + `"
upstreams:
  - {name: mock, type: mock, models: ["*"]}
pricing:
  mock-1: {input: 1000, output: 1000}
policy:
  dir: ` + rego + `
audit:
  dir: ` + filepath.Join(dir, "audit") + `
  chain: ops
`,
		config.AgentsFile: `agents:
  coder:
    type: code-generator
    capabilities: [read, write]
    models: ["mock-*"]
    rate_limit: 10/hour
    token_limit: 1000/hour
    budget: 5USD/day
    token_sha256: "` + roster.HashTokenHex("tok-coder") + `"
`,
		config.ProtocolFile: "protocol: {}\n",
	})
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		srv.Close()
		a.Close()
		_ = auditLog.Close()
	})
	post := func(token, model string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","max_tokens":50,"messages":[{"role":"user","content":"hello"}]}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	for range 2 {
		if s := post("tok-coder", "mock-1"); s != http.StatusOK {
			t.Fatalf("chat: %d", s)
		}
	}
	if s := post("tok-coder", "gpt-4o"); s != http.StatusNotFound {
		t.Fatalf("a model outside the allow-list: %d", s)
	}
	if s := post("wrong-token", "mock-1"); s != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", s)
	}

	page := func(token string) string {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		res, err := c.PostForm(srv.URL+"/review/login", url.Values{"token": {token}, "next": {"/review/ops"}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/review/ops" {
			t.Fatalf("sign in to the operator page: %d at %s: %s", res.StatusCode, res.Request.URL, body)
		}
		return string(body)
	}
	var body string
	// The last entries of an exchange may be written just after its answer.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		body = page("tok-admin")
		if strings.Contains(body, "model_not_found") && strings.Contains(body, "auth.failure") || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`2 of 10 requests per hour \(20%\)`), // the refused model is refused before the limits
		regexp.MustCompile(`[1-9][0-9]* of 1,000 tokens per hour`),
		regexp.MustCompile(`\$0\.0[1-9][0-9]* of \$5\.00 per day`), // two calls of about 14 tokens at $1000 per million, to the micro-dollar
		regexp.MustCompile(`<td class="nw"><b>coder</b></td>`),
		regexp.MustCompile(`model_not_found`),
		regexp.MustCompile(`Incorrect API key provided\.`),
		regexp.MustCompile(`<td>127\.0\.0\.1</td>`), // the admin sees the source
		regexp.MustCompile(`id="sum-trail">sound</span>`),
		regexp.MustCompile(`<code id="sum-revision">` + a.policies.Revision()[:12] + `</code>`),
		regexp.MustCompile(`Pending escalations|Nothing is waiting for a decision`),
	} {
		if !want.MatchString(body) {
			t.Errorf("operator page lacks %s", want)
		}
	}
	if reviewer := page("tok-reviewer"); strings.Contains(reviewer, "127.0.0.1") || !strings.Contains(reviewer, "Reviewer view") {
		t.Error("a reviewer's page shows refusals' source addresses")
	}
}

// refusalOf reads each kind of refusal the gateway writes, and nothing
// else.
func TestRefusalOf(t *testing.T) {
	at := time.Date(2025, 11, 2, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		kind, summary string
		refused       bool
		reason        string
		status, count int
		source        string
	}{
		{"auth.failure", `{"method":"POST","reason":"Incorrect API key provided.","remote":"10.0.0.9","route":"/v1/chat/completions","count":7}`,
			true, "Incorrect API key provided.", 0, 7, "10.0.0.9"},
		{"ratelimit.reject", `{"route":"/v1/chat/completions","dimension":"tokens","checks":{"limits":{"verdict":"reject","tokens":"1000/hour","requests":"10/hour"}}}`,
			true, "tokens limit reached (1000/hour)", 429, 1, ""},
		{"llm.request", `{"status":403,"error_code":"policy_denied","checks":{"policy":{"verdict":"deny","reasons":["gpt-4o is for coders","no PII"]},"auth":{"verdict":"pass"}}}`,
			true, "policy_denied: policy: gpt-4o is for coders; policy: no PII", 403, 1, ""},
		{"llm.request", `{"status":404,"error_code":"model_not_found","checks":{"auth":{"verdict":"pass"}}}`, true, "model_not_found", 404, 1, ""},
		{"message.reject", `{"status":422,"error_code":"recipient_unreachable","reason":"Agent b has no endpoint."}`, true, "Agent b has no endpoint.", 422, 1, ""},
		{"agent.decision", `{"status":"rejected","violations":[{"rule":"authorization","description":"lacks write"},{"rule":"rationale","description":"none given"}]}`,
			true, "authorization: lacks write; rationale: none given", 0, 1, ""},
		{"escalation.decision", `{"decision":"reject","reviewer":"reviewer:alice","comment":"not now"}`, true, "rejected by reviewer:alice: not now", 0, 1, ""},
		{"escalation.decision", `{"decision":"reject","reviewer":"reviewer:alice","applied":false}`, false, "", 0, 0, ""},
		{"escalation.decision", `{"decision":"approve","reviewer":"reviewer:alice"}`, false, "", 0, 0, ""},
		{"agent.decision", `{"status":"approved"}`, false, "", 0, 0, ""},
		{"llm.response", `{"status":200,"checks":{"policy":{"verdict":"allow"}}}`, false, "", 0, 0, ""},
		{"llm.response", `{"status":502,"error_code":"upstream_error"}`, false, "", 0, 0, ""},
		{"config.reload", `{"event":"startup"}`, false, "", 0, 0, ""},
	}
	for _, c := range cases {
		var sum map[string]any
		if err := json.Unmarshal([]byte(c.summary), &sum); err != nil {
			t.Fatal(err)
		}
		e := audit.Entry{Kind: c.kind, TS: at, AgentID: "coder", RequestID: "req-1", Summary: json.RawMessage(c.summary)}
		r, ok := refusalOf(e, sum)
		if ok != c.refused {
			t.Errorf("%s %s: refusal %v, want %v", c.kind, c.summary, ok, c.refused)
			continue
		}
		if !ok {
			continue
		}
		if r.Reason != c.reason || r.Status != c.status || r.Count != c.count || r.Source != c.source || r.Kind != c.kind || !r.At.Equal(at) || r.Agent != "coder" {
			t.Errorf("%s %s: %+v", c.kind, c.summary, r)
		}
	}
}

// Trail reads the chain's end back: its state, the refusals newest first,
// and the shadow policies' disagreements.
func TestOpsSourceTrail(t *testing.T) {
	dir := t.TempDir()
	l, err := audit.Open(audit.Config{Dir: dir, Chain: "gw-1", CheckpointEvery: 3, CheckpointInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for _, r := range []audit.Record{
		{Kind: audit.KindAuthFailure, Object: audit.Members("reason", "Incorrect API key provided.", "remote", "10.0.0.9", "route", "/v1/models")},
		{Kind: audit.KindLLMResponse, AgentID: "coder", Object: audit.Members("status", 200)},
		{Kind: "policy.shadow", Object: audit.Members("point", "chat", "live", "allow", "shadow", "deny [no gpt-4o]")},
		{Kind: audit.KindRateLimitReject, AgentID: "coder", Object: audit.Members("dimension", "requests", "checks", map[string]any{"limits": map[string]any{"requests": "10/hour"}})},
	} {
		if _, err := l.Append(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	src := &opsSource{auditDir: dir, chain: "gw-1", tailBytes: opsTailBytes, log: slog.New(slog.DiscardHandler)}
	st := src.Trail(t.Context())
	if st.Error != "" || st.Problem != "" || st.Read != 4 || st.LastSeq != 4 || st.Partial {
		t.Fatalf("trail %+v", st)
	}
	if cp := st.Checkpoint; cp == nil || cp.Seq != 3 || !cp.Checked || cp.Signed {
		t.Errorf("checkpoint %+v", cp)
	}
	if len(st.Refusals) != 2 || st.Refusals[0].Kind != audit.KindRateLimitReject || st.Refusals[0].Reason != "requests limit reached (10/hour)" ||
		st.Refusals[1].Source != "10.0.0.9" {
		t.Errorf("refusals %+v", st.Refusals)
	}
	if len(st.Disagreements) != 1 || st.Disagreements[0].Point != "chat" || st.Disagreements[0].Shadow != "deny [no gpt-4o]" {
		t.Errorf("disagreements %+v", st.Disagreements)
	}

	gone := &opsSource{auditDir: filepath.Join(dir, "missing"), chain: "gw-1", tailBytes: opsTailBytes, log: slog.New(slog.DiscardHandler)}
	if st := gone.Trail(t.Context()); st.Error == "" || st.Chain != "gw-1" {
		t.Errorf("an unreadable trail: %+v", st)
	}
}

// TestOpsSourceShowsWorkflowSteps: an agent that starts workflows has its
// step_limit on the operator page, read from the very key the workflow
// engine charges; an agent that starts none has no such row.
func TestOpsSourceShowsWorkflowSteps(t *testing.T) {
	lim := limit.NewMemory()
	set := &definition.Set{
		Workflows: map[string]*definition.Workflow{"review": {Name: "review", Callers: []string{"coder"}}},
		StepLimit: definition.StepLimit{N: 10, Period: time.Hour},
	}
	rule := limit.Rule{N: 10, Period: time.Hour}
	for range 3 {
		if _, err := lim.Allow(t.Context(), workflow.StepsKey+"coder", rule, 1); err != nil {
			t.Fatal(err)
		}
	}
	src := &opsSource{requests: lim, spend: proxy.NewSpend(), workflows: set, log: slog.New(slog.DiscardHandler)}
	got := src.Usage(t.Context(), []*roster.Agent{{ID: "coder"}, {ID: "reader"}})
	var steps []approval.LimitUse
	for _, l := range got[0].Limits {
		if l.Dimension == "workflow steps" {
			steps = append(steps, l)
		}
	}
	if len(steps) != 1 || steps[0].Used != 3 || steps[0].Limit != 10 || steps[0].Period != time.Hour || steps[0].Error != "" {
		t.Errorf("coder's workflow steps %+v", steps)
	}
	for _, l := range got[1].Limits {
		if l.Dimension == "workflow steps" {
			t.Errorf("reader starts no workflow, yet shows %+v", l)
		}
	}
}
