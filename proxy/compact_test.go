package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/compact"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/sacp"
)

func testLibrary(tb testing.TB) *compact.Library {
	tb.Helper()
	lib, err := compact.NewLibrary(
		[]compact.Verb{{Name: "predict", Inputs: []string{"window:integer", "method:string"}, Outputs: "predictions"}},
		[]compact.Tool{{ID: "PRC_EST", SupportedVerbs: []string{"predict"}}})
	if err != nil {
		tb.Fatal(err)
	}
	return lib
}

func testChecker(tb testing.TB, outFmt string, red *redact.Redactor) *compactChecker {
	tb.Helper()
	p := &Protocol{Redactor: red}
	return &compactChecker{p: p, lib: testLibrary(tb), outFmt: outFmt}
}

const validCompact = `{"g":"PREDICT","plan":[["predict","PRC_EST",{"window":3}]]}`

func TestCompactCheck(t *testing.T) {
	cases := []struct {
		note, outFmt, content string
		valid                 bool
		kind                  string // when valid
		body                  string // when valid
		err                   string // when invalid
	}{
		{"bare message", "raw", validCompact, true, "message", validCompact, ""},
		{"fenced with prose", "raw", "Sure:\n```json\n" + validCompact + "\n```\nbye", true, "message", validCompact, ""},
		{"ERR object", "raw", ` {"status":"ERR","code":"REQ_CLARIFY"} `, true, "err", `{"status":"ERR","code":"REQ_CLARIFY"}`, ""},
		{"escaped ERR key", "raw", `{"\u0073tatus":"ERR","code":"X"}`, true, "err", `{"\u0073tatus":"ERR","code":"X"}`, ""},
		{"prose raw", "raw", "It will rain.", false, "", "",
			`MALFORMED_MESSAGE: out_fmt is "raw": prose is not allowed, the answer must be one JSON object`},
		{"prose summary", "summary", "It will rain.", false, "", "",
			`MALFORMED_MESSAGE: out_fmt is "summary": prose is not allowed, the answer must be one JSON object`},
		{"unknown verb", "raw", `{"g":"X","plan":[["fly","PRC_EST",{}]]}`, false, "", "", "UNKNOWN_VERB at plan[0][0]: "},
		{"missing plan", "raw", `{"g":"X"}`, false, "", "", "MISSING_FIELD"},
		{"bad ERR object", "raw", `{"status":"OK"}`, false, "", "", "INVALID_FIELD at status: "},
		{"duplicate key", "raw", `{"g":"X","g":"Y","plan":[]}`, false, "", "", "MALFORMED_MESSAGE: "},
		{"human prose", "human", "It will rain.", true, "prose", "It will rain.", ""},
		{"human ERR", "human", `{"status":"ERR","code":"X"}` + "\n", true, "err", `{"status":"ERR","code":"X"}` + "\n", ""},
		{"human invalid JSON passes as is", "human", `{"g":1}`, true, "prose", `{"g":1}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			c := testChecker(t, tc.outFmt, nil)
			valid, errs := c.Check(tc.content)
			if valid != tc.valid {
				t.Fatalf("valid = %v, errs %v", valid, errs)
			}
			if valid {
				if len(errs) != 0 || c.last.kind != tc.kind || c.last.body != tc.body {
					t.Errorf("kind %q body %q errs %v", c.last.kind, c.last.body, errs)
				}
				return
			}
			if len(errs) != 1 || !strings.HasPrefix(errs[0], tc.err) || (strings.HasSuffix(tc.err, ": ") && len(errs[0]) == len(tc.err)) {
				t.Errorf("errs = %q, want prefix %q", errs, tc.err)
			}
		})
	}
}

func TestCompactSettle(t *testing.T) {
	red, err := redact.New(redact.Config{Detectors: redact.Names()})
	if err != nil {
		t.Fatal(err)
	}
	blocking, err := redact.New(redact.Config{Detectors: redact.Names(), Block: []string{"email"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		note, outFmt, content string
		red                   *redact.Redactor
		attempts              int
		want                  settled
		redaction             map[string]any
		auditMessage          string
	}{
		{"message compacted and redacted", "raw", "{ \"g\": \"MAIL\",\n \"plan\": [[\"predict\", \"PRC_EST\", {\"method\": \"to bob@example.com\"}]] }", red, 1,
			settled{content: `{"g":"MAIL","plan":[["predict","PRC_EST",{"method":"to [REDACTED:email]"}]]}`, status: "VALID", valid: true},
			map[string]any{"verdict": "applied", "count": 1}, ""},
		{"no redactor still compacts", "raw", "{ \"g\": \"A\", \"plan\": [[\"predict\", \"PRC_EST\", {}]] }", nil, 1,
			settled{content: `{"g":"A","plan":[["predict","PRC_EST",{}]]}`, status: "VALID", valid: true},
			map[string]any{"verdict": "disabled"}, ""},
		{"model ERR object", "raw", `{"status":"ERR","code":"REQ_CLARIFY","details":"ask ann@example.com"}`, red, 2,
			settled{content: `{"status":"ERR","code":"REQ_CLARIFY","details":"ask [REDACTED:email]"}`, status: "ERR", valid: true},
			map[string]any{"verdict": "applied", "count": 1}, "REQ_CLARIFY: ask [REDACTED:email]"},
		{"fallback hides the prose", "raw", "call me on bob@example.com <b>now</b>", red, 3,
			settled{content: `{"status":"ERR","code":"INVALID_OUTPUT","details":"no valid SACP answer after 3 attempt(s); last problem: MALFORMED_MESSAGE: out_fmt is \"raw\": prose is not allowed, the answer must be one JSON object"}`, status: "ERR", valid: false},
			map[string]any{"verdict": "applied", "count": 0},
			`INVALID_OUTPUT: no valid SACP answer after 3 attempt(s); last problem: MALFORMED_MESSAGE: out_fmt is "raw": prose is not allowed, the answer must be one JSON object`},
		{"human prose redacted as text", "human", "Write to bob@example.com <soon>.", red, 1,
			settled{content: "Write to [REDACTED:email] <soon>.", status: "VALID", valid: true},
			map[string]any{"verdict": "applied", "count": 1}, "Write to [REDACTED:email] <soon>."},
		{"blocked", "raw", `{"g":"A","plan":[["predict","PRC_EST",{"method":"bob@example.com"}]]}`, blocking, 1,
			settled{content: `{"g":"A","plan":[["predict","PRC_EST",{"method":"[REDACTED:email]"}]]}`, status: "VALID", valid: true, blocked: true},
			map[string]any{"verdict": "applied", "count": 1, "blocked": "email"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			c := testChecker(t, tc.outFmt, tc.red)
			c.Check(tc.content)
			ex := &scope.Exchange{Attempts: tc.attempts}
			got := c.Settle(context.Background(), ex, tc.content)
			if got != tc.want {
				t.Errorf("settled:\n got %+v\nwant %+v", got, tc.want)
			}
			v, _ := ex.Verdict(scope.CheckRedaction)
			o := &audit.Object{}
			v.Encode(o)
			if got := o.Map(); fmt.Sprint(got) != fmt.Sprint(tc.redaction) {
				t.Errorf("redaction check = %v, want %v", got, tc.redaction)
			}
			if ex.SACP == nil || ex.SACP.Status != tc.want.status || ex.SACP.Valid != tc.want.valid || ex.SACP.Attempts != tc.attempts ||
				ex.SACP.Message != tc.auditMessage || (len(ex.SACP.Errors) > 0) == tc.want.valid {
				t.Errorf("ex.SACP = %+v", ex.SACP)
			}
			if !json.Valid([]byte(got.content)) && tc.outFmt != "human" {
				t.Errorf("content is not JSON: %s", got.content)
			}
			f := c.Protocol("valid")
			if f.Check != scope.CheckProtocol || f.Format != FormatCompact || f.OutFmt != tc.outFmt || f.Answer == "" {
				t.Errorf("protocol check = %+v", f)
			}
		})
	}
}

func TestLastUserContent(t *testing.T) {
	cases := []struct{ note, body, want string }{
		{"string", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"{\"out_fmt\":\"human\"}"}]}`, `{"out_fmt":"human"}`},
		{"last user wins", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"},{"role":"assistant","content":"d"}]}`, "c"},
		{"parts joined", `{"messages":[{"role":"user","content":[{"type":"text","text":"{\"g\":"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"1}"}]}]}`, `{"g":1}`},
		{"no user", `{"messages":[{"role":"system","content":"s"}]}`, ""},
		{"null content", `{"messages":[{"role":"user","content":null}]}`, ""},
		{"numeric content", `{"messages":[{"role":"user","content":5}]}`, ""},
		{"not JSON", `{"messages":`, ""},
	}
	for _, tc := range cases {
		if got := lastUserContent([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.note, got, tc.want)
		}
	}
}

// failingSource is a library source whose store is down.
type failingSource struct{ lib *compact.Library }

func (f failingSource) Library(context.Context) (*compact.Library, error) {
	return f.lib, errors.New("redis: connection refused")
}

func TestCompactLibrarySource(t *testing.T) {
	lib := testLibrary(t)
	empty, _ := compact.NewLibrary(nil, nil)
	cases := []struct {
		note   string
		source LibrarySource
		valid  bool // validCompact needs predict/PRC_EST
		warned bool
	}{
		{"no source: empty library", nil, false, false},
		{"error: last good library used", failingSource{lib}, true, true},
		{"error without a library: empty", failingSource{nil}, false, true},
		{"ok", staticSource{lib}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			var logs bytes.Buffer
			p := &Protocol{Library: tc.source, EmptyLibrary: empty, Log: slog.New(slog.NewTextHandler(&logs, nil))}
			ex := &scope.Exchange{RequestID: "req-1", Agent: &roster.Agent{ID: "c", ResponseFormat: FormatCompact},
				Body: []byte(`{"messages":[{"role":"user","content":"{}"}]}`)}
			c := p.compactChecker(context.Background(), ex)
			if valid, errs := c.Check(validCompact); valid != tc.valid {
				t.Errorf("valid = %v (%v)", valid, errs)
			}
			warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "connection refused")
			if warned != tc.warned {
				t.Errorf("warned = %v: %s", warned, logs.String())
			}
			if c.outFmt != "raw" || c.tpl.SHA256 == "" || !strings.Contains(c.tpl.Text, "### Agent Role: c\n") {
				t.Errorf("checker outFmt %q template %q", c.outFmt, c.tpl.Text)
			}
		})
	}
}

type staticSource struct{ lib *compact.Library }

func (s staticSource) Library(context.Context) (*compact.Library, error) { return s.lib, nil }

func TestInvalidOutputIsAnERRObject(t *testing.T) {
	b := invalidOutput(2, compact.Result{Status: "ERR", Code: "UNKNOWN_TOOL", Path: "plan[0][1]", Details: `tool "<X>" & co`})
	want := `{"status":"ERR","code":"INVALID_OUTPUT","details":"no valid SACP answer after 2 attempt(s); last problem: UNKNOWN_TOOL at plan[0][1]: tool \"<X>\" & co"}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	if !compact.IsErrObject(b) {
		t.Errorf("not an ERR object: %s", b)
	}
}

func TestProtocolAppliesAndTemplates(t *testing.T) {
	std := sacp.NewTemplate("standard")
	built := sacp.NewTemplate("built at startup")
	p := &Protocol{Template: std, CompactTemplates: map[string]sacp.Template{"c1": built}}
	c2 := &roster.Agent{ID: "c2", ResponseFormat: FormatCompact, Profile: roster.Profile{SupportedVerbs: []string{"predict"}}}
	cases := []struct {
		agent   *roster.Agent
		applies bool
		tpl     sacp.Template
	}{
		{&roster.Agent{ID: "j", ResponseFormat: "json_standard"}, true, std},
		{&roster.Agent{ID: "u", UseStandardProtocol: true}, true, std},
		{&roster.Agent{ID: "c1", ResponseFormat: FormatCompact}, true, built},
		{c2, true, compactTemplate(c2)},
		{&roster.Agent{ID: "n", ResponseFormat: "none"}, false, std},
	}
	for _, tc := range cases {
		if got := p.Applies(tc.agent); got != tc.applies {
			t.Errorf("%s: Applies = %v", tc.agent.ID, got)
		}
		if got := p.templateFor(tc.agent); got != tc.tpl {
			t.Errorf("%s: template %q, want %q", tc.agent.ID, got.Text, tc.tpl.Text)
		}
	}
	if !strings.Contains(compactTemplate(c2).Text, "### Supported Verb(s):\n- predict\n") {
		t.Errorf("compact template does not list the verbs: %s", compactTemplate(c2).Text)
	}
}

// FuzzCompactAnswer feeds arbitrary model output through Check and Settle:
// no panic, a valid verdict has no errors, what the client gets is JSON
// unless it is human prose, and an answer that stays invalid becomes the
// gateway's ERR object.
func FuzzCompactAnswer(f *testing.F) {
	for _, s := range []string{
		validCompact,
		"```json\n" + validCompact + "\n```",
		`{"status":"ERR","code":"X","details":"bob@example.com"}`,
		`{"g":"X","plan":[["predict","PRC_EST",{"window":"3"}]]}`,
		`{"g":"X","plan":[{"parallel":[["predict","PRC_EST",{}]]},["join","MERGE",{}]]}`,
		`{"g":"X","g":"Y","plan":[]}`,
		"prose {with} braces { and \"quotes",
		"\uFEFF" + validCompact,
		`{"g":"\ud800","plan":[]}`,
		"",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	red, err := redact.New(redact.Config{Detectors: redact.Names()})
	if err != nil {
		f.Fatal(err)
	}
	lib := testLibrary(f)
	f.Fuzz(func(t *testing.T, content string, human bool) {
		outFmt := "raw"
		if human {
			outFmt = "human"
		}
		c := &compactChecker{p: &Protocol{Redactor: red}, lib: lib, outFmt: outFmt}
		valid, errs := c.Check(content)
		if valid != (len(errs) == 0) || len(errs) > 1 {
			t.Fatalf("valid %v with errs %q", valid, errs)
		}
		if human && !valid {
			t.Fatalf("out_fmt human refused %q: %v", content, errs)
		}
		kind := c.last.kind
		got := c.Settle(context.Background(), &scope.Exchange{Attempts: 1}, content)
		if got.valid != valid {
			t.Fatalf("settled valid %v, checked %v", got.valid, valid)
		}
		switch {
		case !valid:
			if got.status != compact.StatusErr || !compact.IsErrObject([]byte(got.content)) ||
				!strings.Contains(got.content, `"code":"INVALID_OUTPUT"`) {
				t.Fatalf("fallback = %s (%s)", got.content, got.status)
			}
		case kind == "prose":
			if want, _ := red.String(content); got.content != want || got.status != compact.StatusValid {
				t.Fatalf("prose = %q, want %q", got.content, want)
			}
		default:
			if !json.Valid([]byte(got.content)) {
				t.Fatalf("answer is not JSON: %q", got.content)
			}
			if (kind == "err") != (got.status == compact.StatusErr) {
				t.Fatalf("kind %s with status %s", kind, got.status)
			}
		}
	})
}
