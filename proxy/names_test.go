package proxy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/sacp"
)

const addr = "alice@example.com"

func namesRedactor(t testing.TB, block ...string) *redact.Redactor {
	t.Helper()
	r, err := redact.New(redact.Config{Detectors: redact.Names(), Block: block})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A member name is the agent's text: an address used as a key anywhere in a
// request is masked (and counted) before the provider sees it, or blocks
// the request where its detector blocks.
func TestRequestMemberNamesRedacted(t *testing.T) {
	bodies := map[string]string{
		"metadata":        `{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"` + addr + `":"v"}}`,
		"logit_bias":      `{"model":"m","messages":[{"role":"user","content":"hi"}],"logit_bias":{"` + addr + `":5}}`,
		"tool parameters": `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"` + addr + `":{"type":"string"}}}}}]}`,
		"tool arguments":  `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"` + addr + `\":\"x\"}"}}]}]}`,
		"schema":          `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"properties":{"` + addr + `":{}}}}}}`,
		"unknown member":  `{"model":"m","messages":[{"role":"user","content":"hi","` + addr + `":1}]}`,
		"escaped name":    `{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"alice\u0040example.com":"v"}}`,
	}
	r, blocking := namesRedactor(t), namesRedactor(t, "email")
	for note, body := range bodies {
		out, res, err := redactPrompt(r, []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", note, err)
		}
		if strings.Contains(string(out), addr) || !strings.Contains(string(out), "[REDACTED:email]") || res.Counts["email"] != 1 {
			t.Errorf("%s: sent %s, counts %v", note, out, res.Counts)
		}
		if !jsontext.Value(out).IsValid() {
			t.Errorf("%s: not valid JSON: %s", note, out)
		}
		if _, res, _ := redactPrompt(blocking, []byte(body)); res.Blocked != "email" {
			t.Errorf("%s: a blocked address as a name did not block: %+v", note, res)
		}
	}
	// The gateway's own vocabulary is still read as such: a masked name
	// never takes the place of a known field.
	out, _, err := redactPrompt(r, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"`+addr+`":1,"bob@example.com":2,"[REDACTED:email]":3}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"metadata":{"[REDACTED:email]#2":1,"[REDACTED:email]#3":2,"[REDACTED:email]":3}`; !strings.Contains(string(out), want) {
		t.Errorf("colliding names: %s", out)
	}
}

// A provider's answer carries names too: in tool call arguments and in
// members the gateway does not know. They are masked, or withhold the
// choice (content_filter) where their detector blocks.
func TestAnswerMemberNamesRedacted(t *testing.T) {
	answers := map[string]string{
		"tool call arguments": `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"` + addr + `\":\"x\"}"}}]}}]}`,
		"unknown member":      `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok","extra":{"` + addr + `":true}}}]}`,
		"top-level member":    `{"id":"x","object":"chat.completion","created":1,"model":"m","` + addr + `":1,"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]}`,
	}
	r, blocking := namesRedactor(t), namesRedactor(t, "email")
	for note, body := range answers {
		out, _, res, err := checkAnswer(r, []byte(body), true)
		if err != nil {
			t.Fatalf("%s: %v", note, err)
		}
		if strings.Contains(string(out), addr) || res.Counts["email"] != 1 {
			t.Errorf("%s: client got %s, counts %v", note, out, res.Counts)
		}
		out, _, res, err = checkAnswer(blocking, []byte(body), true)
		if err != nil {
			t.Fatalf("%s: %v", note, err)
		}
		if strings.Contains(string(out), addr) || !strings.Contains(string(out), `"finish_reason":"content_filter"`) || res.Blocked != "email" {
			t.Errorf("%s: blocked answer %s, %+v", note, out, res)
		}
	}
}

// Streamed tool call arguments are text fragments: an address used as a
// name in them is found by the stream redactor even when a chunk boundary
// splits it; a name of a chunk's own members is masked whole.
func TestStreamMemberNamesRedacted(t *testing.T) {
	chunk := func(delta string) []byte {
		return []byte(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`)
	}
	args := `{"` + addr + `":"x"}`
	var events [][]byte
	events = append(events, chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":""}}]}`))
	for _, frag := range []string{args[:5], args[5:12], args[12:]} {
		q, _ := json.Marshal(frag)
		events = append(events, chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(q)+`}}]}`))
	}
	events = append(events, chunk(`{"content":"","`+addr+`":1}`))
	s := newChunkScanner(namesRedactor(t))
	var sent []byte
	for _, ev := range events {
		res, err := s.event(ev)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, res.out...)
	}
	tail, _ := s.flush()
	sent = append(sent, tail...)
	if strings.Contains(string(sent), "alice") || strings.Count(string(sent), "[REDACTED:email]") != 2 || s.result().Counts["email"] != 2 {
		t.Errorf("stream sent %s, counts %v", sent, s.result().Counts)
	}

	b := newChunkScanner(namesRedactor(t, "email"))
	res, err := b.event(chunk(`{"content":"hi","` + addr + `":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if !res.blocked || strings.Contains(string(res.out), addr) || !strings.Contains(string(res.out), "content_filter") {
		t.Errorf("blocked name in a chunk: %+v %s", res, res.out)
	}
}

// The validator's findings name the member they are about (the re-ask
// tells the model); the audit entry's copy is redacted like the rest of
// the trail, so a name the detectors find is not written there.
func TestSACPErrorsInTheAuditAreRedacted(t *testing.T) {
	v, err := sacp.NewValidator([]byte(`{"type":"object","properties":{"n":{"type":"number"}},"additionalProperties":false}`), "t")
	if err != nil {
		t.Fatal(err)
	}
	c := &standardChecker{p: &Protocol{Redactor: namesRedactor(t), ApplyTo: map[string]bool{"data": true, "message": true}}, v: v}
	content := `{"thought":"t","status":"success","data":{"` + addr + `":1},"message":"m"}`
	if ok, errs := c.Check(content); ok || !strings.Contains(strings.Join(errs, " "), addr) {
		t.Fatalf("the finding does not name the member: %v %v", ok, errs)
	}
	ex := &scope.Exchange{Attempts: 1}
	got := c.Settle(context.Background(), ex, content)
	if strings.Contains(got.content, addr) || ex.SACP == nil || len(ex.SACP.Errors) == 0 || strings.Contains(strings.Join(ex.SACP.Errors, " "), addr) {
		t.Errorf("settled %q, audit errors %v", got.content, ex.SACP)
	}
}
