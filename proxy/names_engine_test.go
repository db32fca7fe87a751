package proxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

const nameAddr = "alice@example.com"

// An SACP answer's data (a workflow step's answer too) is redacted names
// and all: an address used as a key reaches the client masked and counted.
func TestProtocolDataMemberNamesRedacted(t *testing.T) {
	answer := `{"thought":"t","status":"success","data":{"` + nameAddr + `":{"bob@example.com":1,"[REDACTED:email]":2}},"message":"done"}`
	e := newEngine(t, jsonAnswer(answer), engineOpts{})
	w, ex := e.do(e.gw.ChatCompletions(), "tok-proto", `{"model":"m","messages":[{"role":"user","content":"go"}]}`)
	if w.Code != http.StatusOK || w.Header().Get("X-SACP-Valid") != "true" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var got struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got.Choices) != 1 {
		t.Fatalf("answer %s: %v", w.Body, err)
	}
	content := got.Choices[0].Message.Content
	if strings.Contains(content, "example.com") || !strings.Contains(content, `{"[REDACTED:email]":{"[REDACTED:email]#2":1,"[REDACTED:email]":2}}`) {
		t.Errorf("data sent to the client: %s", content)
	}
	if ex.Redactions["email"] != 2 {
		t.Errorf("redactions %v, want 2 addresses", ex.Redactions)
	}
}

// The Anthropic Messages dialect reaches redaction through the neutral
// form: tool_use.input becomes tool call arguments and input_schema a
// function's parameters, and their names are scanned there, both ways.
func TestMessagesDialectMemberNames(t *testing.T) {
	const toolAnswer = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",` +
		`"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"` + nameAddr + `\":\"x\"}"}}]}}],` +
		`"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`
	body := `{"model":"m","max_tokens":64,"tools":[{"name":"f","input_schema":{"type":"object","properties":{"` + nameAddr + `":{"type":"string"}}}}],` +
		`"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{"` + nameAddr + `":"v"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}]}`
	e := newEngine(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, toolAnswer)
	}, engineOpts{protocol: "  redaction:\n    requests: true\n"})
	w, _ := e.do(e.gw.Messages(), "tok-plain", body)
	_, sent := e.upstreamSaw()
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if strings.Contains(sent, nameAddr) || strings.Count(sent, "[REDACTED:email]") != 2 {
		t.Errorf("the provider received %s", sent)
	}
	if strings.Contains(w.Body.String(), nameAddr) || !strings.Contains(w.Body.String(), `"input":{"[REDACTED:email]":"x"}`) {
		t.Errorf("the client received %s", w.Body)
	}

	blocking := newEngine(t, func(w http.ResponseWriter, _ *http.Request) {
		t.Error("a blocked request reached the provider")
	}, engineOpts{protocol: "  redaction:\n    requests: true\n    block: [email]\n"})
	w, _ = blocking.do(blocking.gw.Messages(), "tok-plain", body)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `"type":"error"`) || strings.Contains(w.Body.String(), nameAddr) {
		t.Errorf("blocked: %d %s", w.Code, w.Body)
	}
}

// The Responses dialect: a function tool's parameters and a function
// call's arguments carry names too.
func TestResponsesDialectMemberNames(t *testing.T) {
	body := `{"model":"m","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"` + nameAddr + `":{"type":"string"}}}}],` +
		`"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"call_1","name":"f","arguments":"{\"` + nameAddr + `\":\"v\"}"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"ok"}]}`
	e := newEngine(t, jsonAnswer("done"), engineOpts{protocol: "  redaction:\n    requests: true\n"})
	w, ex := e.do(e.gw.Responses(), "tok-plain", body)
	_, sent := e.upstreamSaw()
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if strings.Contains(sent, nameAddr) || strings.Count(sent, "[REDACTED:email]") != 2 || ex.Redactions["email"] != 2 {
		t.Errorf("the provider received %s (redactions %v)", sent, ex.Redactions)
	}
}
