package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sacpgw/gateway/compact"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/sacp"
)

// FormatCompact is the response_format of agents that answer in compact
// SACP messages (docs/agent-messaging.md, Compact SACP).
const FormatCompact = "sacp_compact"

// outFmtHuman is the only out_fmt under which an answer may be prose (a rule
// of compact SACP).
const outFmtHuman = "human"

// CodeInvalidOutput is the code of the ERR object the gateway sends when a
// sacp_compact agent gave no valid answer within its attempts.
const CodeInvalidOutput = "INVALID_OUTPUT"

// LibrarySource supplies the verb and tool library that sacp_compact answers
// are validated against (registry.Registry, whose library grows with spawned
// agents). On an error the library returned, if any, is the last good one.
type LibrarySource interface {
	Library(ctx context.Context) (*compact.Library, error)
}

// isCompact reports whether the agent answers in compact messages.
func isCompact(a *roster.Agent) bool { return a.ResponseFormat == FormatCompact }

// compactTemplate builds compact SACP's agent prompt for the agent.
func compactTemplate(a *roster.Agent) sacp.Template {
	return sacp.NewTemplate(compact.Prompt(compact.PromptAgent{Name: a.ID, Verbs: a.SupportedVerbs, Tools: a.SupportedTools}))
}

// templateFor is the prompt injected for the agent: the agent's compact SACP
// prompt for sacp_compact, the SACP template otherwise.
func (p *Protocol) templateFor(a *roster.Agent) sacp.Template {
	if !isCompact(a) {
		return p.Template
	}
	if t, ok := p.CompactTemplates[a.ID]; ok {
		return t
	}
	// Not built at startup (a Protocol assembled by hand): same text.
	return compactTemplate(a)
}

// library returns the library to validate against now. A source that fails
// still serves: its last good library is used and the failure logged, since
// refusing every answer while a store is unreachable would stop the agents.
func (p *Protocol) library(ctx context.Context, ex *scope.Exchange) *compact.Library {
	if p.Library == nil {
		return p.emptyLibrary()
	}
	lib, err := p.Library.Library(ctx)
	if err != nil && p.Log != nil {
		p.Log.Warn("sacp_compact: verb/tool library not refreshed, validating against the last good one",
			"request_id", ex.RequestID, "agent", ex.Agent.ID, "error", err.Error())
	}
	if lib == nil {
		return p.emptyLibrary()
	}
	return lib
}

func (p *Protocol) emptyLibrary() *compact.Library {
	if p.EmptyLibrary != nil {
		return p.EmptyLibrary
	}
	lib, _ := compact.NewLibrary(nil, nil) // no definitions: cannot conflict
	return lib
}

// compactChecker judges the answers of one request of a sacp_compact agent.
// It keeps the verdict of the last Check for Settle.
type compactChecker struct {
	p      *Protocol
	tpl    sacp.Template
	lib    *compact.Library
	outFmt string
	last   compactVerdict
}

// compactVerdict is what Check found in one answer.
type compactVerdict struct {
	valid bool
	// kind is "message", "err" (an ERR object) or "prose" (out_fmt human).
	kind string
	// body is the sanitized JSON object, or the whole answer for prose.
	body string
	// res is the validator's result for an invalid answer.
	res compact.Result
}

func (p *Protocol) compactChecker(ctx context.Context, ex *scope.Exchange) *compactChecker {
	return &compactChecker{
		p:      p,
		tpl:    p.templateFor(ex.Agent),
		lib:    p.library(ctx, ex),
		outFmt: compact.OutFormat([]byte(lastUserContent(ex.Body))),
	}
}

// Check sanitizes the answer like a json_standard one (fences and prose
// around the object go) and validates the object as a compact SACP answer.
// With out_fmt human any answer is accepted as it is; otherwise an answer
// without a valid object is refused (compact SACP has the orchestrator
// reject prose from agents that must answer raw).
func (c *compactChecker) Check(content string) (bool, []string) {
	if c.outFmt == outFmtHuman {
		kind := "prose"
		if isErrObject(strings.TrimSpace(content)) {
			kind = "err"
		}
		c.last = compactVerdict{valid: true, kind: kind, body: content}
		return true, nil
	}
	obj, ok := sacp.Sanitize(content)
	var res compact.Result
	if ok {
		res = c.lib.ValidateAnswer([]byte(obj))
		if res.Valid() {
			kind := "message"
			if isErrObject(obj) {
				kind = "err"
			}
			c.last = compactVerdict{valid: true, kind: kind, body: obj}
			return true, nil
		}
	} else {
		res = compact.Result{Status: compact.StatusErr, Code: compact.CodeMalformedMessage,
			Details: fmt.Sprintf("out_fmt is %q: prose is not allowed, the answer must be one JSON object", c.outFmt)}
	}
	c.last = compactVerdict{res: res}
	return false, []string{describeResult(res)}
}

// isErrObject is compact.IsErrObject without a second parse in the common
// case: text without "status" (or a \u escape that could spell it) cannot
// hold an ERR object.
func isErrObject(s string) bool {
	return (strings.Contains(s, "status") || strings.Contains(s, `\u`)) && compact.IsErrObject([]byte(s))
}

// describeResult is a validator result as one line: code, path, details.
func describeResult(r compact.Result) string {
	s := r.Code
	if r.Path != "" {
		s += " at " + r.Path
	}
	if r.Details != "" {
		s += ": " + r.Details
	}
	return s
}

// Reask is the user message asking for a corrected answer.
func (c *compactChecker) Reask(errs []string) string {
	return sacp.Reask("Your previous response is not a valid SACP answer.", errs,
		"Reply again with exactly one JSON object and nothing before or after it (no prose, no markdown code fences): "+
			`a SACP message with "g" and "plan", each plan step [verb, tool, params] using only your supported verbs and tools, `+
			`or an ERR object {"status":"ERR","code":"<ERROR_CODE>","details":"<reason>"}.`)
}

// Protocol is the audit's protocol check, with the compact format's fields.
func (c *compactChecker) Protocol(v string) scope.Verdict {
	return scope.Verdict{Check: scope.CheckProtocol, Verdict: v, Format: FormatCompact, OutFmt: c.outFmt,
		TemplateSHA256: c.tpl.SHA256, Answer: c.last.kind}
}

// Settle is the client's content for the last answer: the validated object
// as compact JSON with every string value redacted, human prose redacted as
// plain text, or, when no attempt was valid, the gateway's own ERR object
// (the invalid output is not passed on: a raw consumer would choke on it).
func (c *compactChecker) Settle(_ context.Context, ex *scope.Exchange, _ string) settled {
	v := c.last
	if !v.valid {
		v.kind = "err"
		v.body = string(invalidOutput(ex.Attempts, v.res))
	}
	status := compact.StatusValid
	if v.kind == "err" {
		status = compact.StatusErr
	}
	c.last.kind = v.kind // for Protocol: what the client got
	out, res := c.redact(v.kind == "prose", v.body)
	check := scope.Verdict{Check: scope.CheckRedaction, Verdict: "applied", Count: res.Total(), Blocked: res.Blocked}
	if c.p.Redactor == nil {
		check = scope.Verdict{Check: scope.CheckRedaction, Verdict: "disabled", Blocked: res.Blocked}
	}
	ex.Redacted(res.Counts)
	ex.Check(check)
	o := &scope.SACPOutcome{Status: status, Valid: v.valid, Attempts: ex.Attempts}
	if !v.valid {
		o.Errors = []string{c.p.auditText(describeResult(v.res))}
	}
	switch v.kind {
	case "prose":
		o.Message = out
	case "err":
		o.Message = c.p.auditText(errSummary(out))
	}
	ex.SACP = o
	return settled{content: out, status: status, valid: v.valid, blocked: res.Blocked != ""}
}

// redact masks what the detectors find: in every string value of a JSON
// answer (keys and numbers untouched), or in prose as a whole. JSON comes out
// compact either way.
func (c *compactChecker) redact(prose bool, body string) (string, redact.Result) {
	r := c.p.Redactor
	switch {
	case prose && r == nil:
		return body, redact.Result{}
	case prose:
		return r.String(body)
	case r == nil:
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(body)) != nil {
			return body, redact.Result{}
		}
		return buf.String(), redact.Result{}
	}
	out, res, err := r.JSON([]byte(body))
	if err != nil {
		// Cannot happen for a validated object; never let a value through
		// unscanned all the same.
		return r.String(body)
	}
	return string(out), res
}

// invalidOutput is the ERR object that replaces an answer still invalid
// after the last attempt. It names the validator's last finding, never the
// output itself.
func invalidOutput(attempts int, last compact.Result) []byte {
	details := fmt.Sprintf("no valid SACP answer after %d attempt(s); last problem: %s", attempts, describeResult(last))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // read by agents and logs, not web pages
	_ = enc.Encode(struct {
		Status  string `json:"status"`
		Code    string `json:"code"`
		Details string `json:"details"`
	}{compact.StatusErr, CodeInvalidOutput, details})
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// errSummary is "CODE: details" of an ERR object, for the audit trail.
func errSummary(obj string) string {
	var e struct {
		Code    string `json:"code"`
		Details string `json:"details"`
	}
	if json.Unmarshal([]byte(obj), &e) != nil {
		return ""
	}
	if e.Details == "" {
		return e.Code
	}
	return e.Code + ": " + e.Details
}

// lastUserContent is the text of the request's last user message: the
// SACP message the agent is asked to process, whose out_fmt governs the
// answer. Content parts are joined; anything unreadable is "".
func lastUserContent(body []byte) string {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return s
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			return ""
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}
