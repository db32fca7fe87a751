package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sacpgw/gateway/compact"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/tracing"
	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/sacp"
)

// Protocol enforces the response protocols: for agents with response_format
// json_standard, the SACP JSON protocol (docs/glossary.md; it injects the
// template, calls the model, sanitizes and validates the answer, asks again
// with the errors while attempts remain, falls back to the SACP fallback
// object, redacts the fields in apply_to, and answers with the validated
// object); for sacp_compact, compact SACP's messages the same way (see
// compact.go).
type Protocol struct {
	Template sacp.Template
	// CompactTemplates holds each sacp_compact agent's compact SACP prompt,
	// built at startup.
	CompactTemplates map[string]sacp.Template
	// Library supplies the verb/tool library of sacp_compact answers; nil:
	// EmptyLibrary.
	Library      LibrarySource
	EmptyLibrary *compact.Library
	// Log receives warnings (a library that could not be refreshed); nil: none.
	Log *slog.Logger
	// Validators holds each protocol agent's validator, compiled at startup.
	Validators map[string]*sacp.Validator
	Redactor   *redact.Redactor
	// ApplyTo names the SACP fields redacted (message, data, thought, next_step_hint).
	ApplyTo map[string]bool
	// MaxAttempts bounds model calls in all, the first included.
	MaxAttempts int
	Reask       bool
	// Timeout bounds all attempts together.
	Timeout time.Duration
	// KeepAlive is the idle time after which a gathering stream sends an
	// SSE comment, so idle-timeout proxies do not cut the client off.
	KeepAlive time.Duration
	Audit     *door.Recorder
	// Policies applies the guardrails to validated answers; nil: none.
	Policies Policies
	// AgentInputs are the agents' policy input documents.
	AgentInputs *AgentInputs
}

// NewProtocol builds the protocol stage from config, compiling every
// protocol agent's data schema once.
func NewProtocol(cfg *config.Config, red *redact.Redactor, rec *door.Recorder) (*Protocol, error) {
	tpl, err := sacp.LoadTemplate(cfg.Protocol.SACP.TemplateFile)
	if err != nil {
		return nil, fmt.Errorf("protocol template: %w", err)
	}
	p := &Protocol{
		Template: tpl, Redactor: red, Audit: rec,
		Validators:       map[string]*sacp.Validator{},
		CompactTemplates: map[string]sacp.Template{},
		ApplyTo:          map[string]bool{},
		MaxAttempts:      max(1, cfg.Protocol.Limits.MaxRetryAttempts),
		Reask:            cfg.Protocol.SACP.ReaskEnabled(),
		Timeout:          cfg.Protocol.Timeouts.Response.D(),
		KeepAlive:        5 * time.Second,
	}
	for _, f := range cfg.Protocol.Redaction.ApplyTo {
		p.ApplyTo[f] = true
	}
	if p.EmptyLibrary, err = compact.NewLibrary(nil, nil); err != nil {
		return nil, fmt.Errorf("empty verb/tool library: %w", err)
	}
	for id, a := range cfg.Agents {
		if isCompact(a) {
			p.CompactTemplates[id] = compactTemplate(a)
			continue
		}
		if !a.StandardProtocol() {
			continue
		}
		v, err := sacp.NewValidator(a.DataSchema, a.DataSchemaFile)
		if err != nil {
			return nil, fmt.Errorf("agent %s: data_schema_file: %w", id, err)
		}
		p.Validators[id] = v
	}
	return p, nil
}

// Applies reports whether the agent speaks a protocol (json_standard or
// sacp_compact).
func (p *Protocol) Applies(a *roster.Agent) bool { return a.StandardProtocol() || isCompact(a) }

// Inject is the request stage that appends the agent's protocol prompt to
// the system prompt of its request and records the prompt's hash.
func (p *Protocol) Inject(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	ex := scope.Get(r.Context())
	if !p.Applies(ex.Agent) {
		ex.Check(scope.Verdict{Check: scope.CheckProtocol, Verdict: "not_applicable"})
		next.ServeHTTP(w, r)
		return nil
	}
	if ex.Choices > 1 {
		return apierror.BadRequest("n", "n > 1 is not supported for agents with the SACP protocol: each answer is validated and re-asked on its own.")
	}
	tpl := p.templateFor(ex.Agent)
	body, err := sacp.Inject(ex.Body, tpl)
	if err != nil {
		return apierror.BadRequest("messages", "Cannot add the protocol instructions to this request: %v.", err)
	}
	ex.Body = body
	ex.TemplateSHA256 = tpl.SHA256
	next.ServeHTTP(w, r)
	return nil
}

// answerChecker is what differs between the response formats in Serve:
// one is made per request, and Serve's loop (call, check, re-ask) and
// delivery are shared.
type answerChecker interface {
	// Check judges one model answer; errs say why it is invalid.
	Check(content string) (valid bool, errs []string)
	// Reask is the user message asking the model again after errs.
	Reask(errs []string) string
	// Settle turns the last checked answer (content) into what the client
	// receives, fallback included; it records the redaction and the
	// guardrail checks and sets ex.SACP.
	Settle(ctx context.Context, ex *scope.Exchange, content string) settled
	// Protocol is the protocol check with verdict v and the format's own
	// fields.
	Protocol(v string) scope.Verdict
}

// settled is the answer as delivered.
type settled struct {
	content string // compact JSON (or human prose), redacted
	status  string // X-SACP-Status
	valid   bool   // X-SACP-Valid: false only for the gateway's fallback
	blocked bool   // a blocking detector matched: content is withheld
}

func (p *Protocol) checker(ctx context.Context, ex *scope.Exchange) answerChecker {
	if isCompact(ex.Agent) {
		return p.compactChecker(ctx, ex)
	}
	return &standardChecker{p: p, v: p.Validators[ex.Agent.ID]}
}

// standardChecker is the json_standard format (SACP, docs/glossary.md).
type standardChecker struct {
	p    *Protocol
	v    *sacp.Validator
	last sacp.Outcome
}

func (c *standardChecker) Check(content string) (bool, []string) {
	c.last = c.v.Check(content)
	return c.last.Valid, c.last.Errors
}

func (c *standardChecker) Reask(errs []string) string { return sacp.ReaskPrompt(errs) }

func (c *standardChecker) Protocol(v string) scope.Verdict {
	return scope.Verdict{Check: scope.CheckProtocol, Verdict: v, TemplateSHA256: c.p.Template.SHA256}
}

func (c *standardChecker) Settle(ctx context.Context, ex *scope.Exchange, content string) settled {
	p, outcome := c.p, c.last
	resp := outcome.Response
	var scan *dataScan
	if outcome.Valid {
		// Guardrails judge what the model said (they run on every validated
		// answer: README, "Behaviour", Policy); the fallback wrapper is the
		// gateway's own words.
		if p.Policies != nil || p.ApplyTo["data"] {
			scan = scanData(p.Redactor, resp.Data)
		}
		guard(ctx, p.Policies, p.AgentInputs, scan, ex, &resp)
	} else {
		resp = sacp.Fallback(content)
	}
	blocked := p.redactResponse(ex, &resp, scan)
	from := ""
	if outcome.Valid {
		from = outcome.StatusFrom
	}
	ex.SACP = &scope.SACPOutcome{Status: resp.Status, StatusFrom: from, Valid: outcome.Valid, Attempts: ex.Attempts, Errors: p.auditTexts(outcome.Errors),
		Thought: p.auditText(resp.Thought), Message: resp.Message}
	return settled{content: string(resp.Compact()), status: resp.Status, valid: outcome.Valid, blocked: blocked != ""}
}

// Serve is the endpoint for protocol agents.
func (p *Protocol) Serve(w http.ResponseWriter, r *http.Request) error {
	ex := scope.Get(r.Context())
	if ex.Route == nil {
		return apierror.ModelNotFound(ex.Model)
	}
	ctx, cancel := context.WithTimeoutCause(r.Context(), p.Timeout, errTimeout)
	defer cancel()
	j := journalOf(r, p.Audit)
	j.begin(ctx, r)

	var out *sseOut
	body := ex.Body
	dropUsage := false
	if ex.Stream {
		body, dropUsage = withStreamUsage(body)
		out = newSSEOut(w, p.KeepAlive)
		defer out.stop()
	}
	chk := p.checker(ctx, ex)
	ans, total, err := p.ask(ctx, r, ex, chk, body)
	if err != nil {
		return p.fail(w, r, out, j, err)
	}
	if err := j.requested(); err != nil {
		return p.fail(w, r, out, j, err)
	}
	switch {
	case ans.status != http.StatusOK:
		// The provider refused (4xx): pass its error on unchanged.
		ex.ErrCode = "upstream_status_" + strconv.Itoa(ans.status)
		return p.replay(w, r, out, j, ans, dropUsage)
	case ans.toolCalls:
		// Tool loop (SACP's tool-calling phase, whose turns pass unchanged):
		// not yet the final synthesis.
		ex.SACP = &scope.SACPOutcome{Status: "tool_calls", Valid: true, Attempts: ex.Attempts, ToolCalls: true}
		ex.Check(chk.Protocol("tool_calls"))
		return p.replay(w, r, out, j, ans, dropUsage)
	}
	res := chk.Settle(ctx, ex, ans.content)
	verdict := "valid"
	if !res.valid {
		verdict = "fallback"
	}
	pv := chk.Protocol(verdict)
	pv.Attempts = ex.Attempts
	ex.Check(pv)
	content, finish := res.content, ans.finish
	if finish == "" {
		finish = "stop"
	}
	if res.blocked {
		content, finish = "", "content_filter"
		ex.SACP.Message = ""
	}
	h := map[string]string{"X-SACP-Status": res.status, "X-SACP-Valid": strconv.FormatBool(res.valid), "X-SACP-Attempts": strconv.Itoa(ex.Attempts)}
	if out == nil {
		b := completionJSON(ans, content, finish, total, ex.UsageKnown)
		if err := j.respond(ctx, http.StatusOK, sha256Hex(b)); err != nil {
			return err
		}
		for k, v := range h {
			w.Header().Set(k, v)
		}
		ex.Content(time.Now()) // the validated answer is released whole
		httpx.WriteRawJSON(w, http.StatusOK, b)
		return nil
	}
	events := streamEvents(ans, content, finish, total, ex.UsageKnown && !dropUsage)
	var all []byte
	for _, e := range events {
		all = append(all, e...)
	}
	if err := j.respond(ctx, http.StatusOK, sha256Hex(all)); err != nil {
		return p.fail(w, r, out, j, err)
	}
	ex.Content(time.Now()) // the gathered stream is released at once
	out.finish(h, http.StatusOK, all)
	return nil
}

// ask asks the provider, and asks again while the answer fails the
// protocol and attempts remain; every attempt's usage counts in total.
// The error is the provider's failure or a re-ask that cannot be built.
func (p *Protocol) ask(ctx context.Context, r *http.Request, ex *scope.Exchange, chk answerChecker, body []byte) (ans *answer, total scope.Usage, err error) {
	for attempt := 1; ; attempt++ {
		ex.Attempts = attempt
		sent := time.Now()
		callCtx, span := tracing.StartModelCall(ctx, tracing.OperationChat, ex.Model)
		ans, err = p.call(callCtx, r, ex, body)
		p.endSpan(ctx, span, ex, ans, err)
		ex.UpstreamTime += time.Since(sent)
		if err != nil {
			return nil, total, upstreamError(ctx, ex.Route.Name, p.Timeout, err)
		}
		// Every attempt is billed, its cached prompt tokens (which cost
		// less) included.
		total = total.Plus(ans.usage)
		if ans.hasUsage || ex.UsageKnown {
			// An unreadable report of any attempt leaves the exchange's
			// usage unknown (scope.Exchange.Report); the answer goes on.
			ex.Report(total)
		}
		if ans.status != http.StatusOK || ans.toolCalls {
			break
		}
		valid, errs := chk.Check(ans.content)
		if valid || !p.Reask || attempt >= p.MaxAttempts {
			break
		}
		body, err = reaskBody(body, ans.content, chk.Reask(errs))
		if err != nil {
			return nil, total, fmt.Errorf("re-ask: %w", err)
		}
	}
	return ans, total, nil
}

// endSpan ends the span of one model call (an attempt) with its answer;
// ans is nil when err is not.
func (p *Protocol) endSpan(ctx context.Context, span trace.Span, ex *scope.Exchange, ans *answer, err error) {
	if !span.IsRecording() {
		return
	}
	var mc tracing.ModelCall
	if err != nil {
		// The code the client gets if no other upstream or attempt helps.
		mc.ErrorType = apierror.From(upstreamError(ctx, ex.Upstream, p.Timeout, err)).Code
	} else {
		mc = tracing.ModelCall{Status: ans.status, ResponseModel: ans.model, UsageKnown: ans.hasUsage && ans.usage.Unreadable == "",
			InputTokens: ans.usage.PromptTokens, OutputTokens: ans.usage.CompletionTokens, ErrorType: tracing.ErrorTypeOf("", ans.status)}
		if ans.finish != "" {
			mc.FinishReasons = []string{ans.finish}
		}
	}
	endModelCall(span, ex, mc)
}

// auditText redacts a field for the audit trail, whatever apply_to says:
// the trail never holds a value the detectors find.
func (p *Protocol) auditText(s string) string {
	if p.Redactor == nil {
		return s
	}
	out, _ := p.Redactor.String(s)
	return out
}

// auditTexts is auditText for each of the validator's findings: they quote
// member names of the answer ("additional properties 'a@b.co' not
// allowed"), which the re-ask may tell the model but the trail may not keep.
func (p *Protocol) auditTexts(ss []string) []string {
	if p.Redactor == nil || len(ss) == 0 {
		return ss
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p.auditText(s)
	}
	return out
}

// redactResponse redacts the apply_to fields in place, counting on the
// Exchange; it returns the blocking detector's name if one matched.
func (p *Protocol) redactResponse(ex *scope.Exchange, resp *sacp.Response, scan *dataScan) string {
	if p.Redactor == nil {
		ex.Check(scope.Verdict{Check: scope.CheckRedaction, Verdict: "disabled"})
		return ""
	}
	var res redact.Result
	text := func(field string, s *string) {
		if p.ApplyTo[field] {
			out, r := p.Redactor.String(*s)
			*s = out
			res.Add(r)
		}
	}
	text("thought", &resp.Thought)
	text("message", &resp.Message)
	text("next_step_hint", &resp.NextStepHint)
	if p.ApplyTo["data"] && len(resp.Data) > 0 {
		if scan == nil { // not scanned for the guardrail (the fallback's data)
			scan = scanData(p.Redactor, resp.Data)
		}
		out, r, err := scan.out, scan.res, scan.err
		if err != nil {
			// The validator passed it, so this cannot happen; if it did,
			// data that cannot be scanned is withheld, never passed on.
			resp.Data = json.RawMessage("{}")
			res.Blocked = "unscannable_data"
		} else {
			resp.Data = out
			res.Add(r)
		}
	}
	ex.Redacted(res.Counts)
	ex.Check(scope.Verdict{Check: scope.CheckRedaction, Verdict: "applied", Count: res.Total(), Fields: sortedFields(p.ApplyTo), Blocked: res.Blocked})
	return res.Blocked
}

func sortedFields(m map[string]bool) []string {
	var out []string
	for _, f := range sacp.Fields() {
		if m[f] {
			out = append(out, f)
		}
	}
	return out
}

// fail answers with err: in OpenAI's error shape before anything was sent,
// or as an SSE error event once keep-alives committed the stream.
func (p *Protocol) fail(w http.ResponseWriter, r *http.Request, out *sseOut, j journal, err error) error {
	ex := j.ex
	if r.Context().Err() != nil {
		p.noAnswer(ex)
		j.abandoned(r.Context(), err)
		return nil
	}
	if out == nil || !out.started() {
		if out != nil {
			out.stop()
		}
		e := apierror.From(err)
		ex.Status = e.Status
		ex.ErrCode = e.Code
		p.auditFailure(r.Context(), j, e.Status)
		return err
	}
	e := apierror.From(err)
	ex.ErrCode, ex.Err = e.Code, err
	out.finish(nil, e.Status, errorEventOf(e))
	p.auditFailure(r.Context(), j, e.Status)
	return nil
}

func (p *Protocol) auditFailure(ctx context.Context, j journal, status int) {
	p.noAnswer(j.ex)
	_ = j.respond(ctx, status, "")
}

// noAnswer records the protocol check of an exchange that ended before an
// answer was settled.
func (p *Protocol) noAnswer(ex *scope.Exchange) {
	if _, ok := ex.Verdict(scope.CheckProtocol); ok {
		return
	}
	c := scope.Verdict{Check: scope.CheckProtocol, Verdict: "no_answer", TemplateSHA256: p.templateFor(ex.Agent).SHA256}
	if isCompact(ex.Agent) {
		c.Format = FormatCompact
	}
	ex.Check(c)
}

// replay passes on a provider's 4xx error or a tool-call turn, read and
// redacted by the same rules as every answer (tool call arguments
// included).
func (p *Protocol) replay(w http.ResponseWriter, r *http.Request, out *sseOut, j journal, ans *answer, dropUsage bool) error {
	ex := j.ex
	var b []byte
	var res redact.Result
	if out != nil && ans.raw == nil {
		scan := newChunkScanner(p.Redactor)
		scan.hideUsage = dropUsage
		for _, data := range ans.events {
			cr, err := scan.event(data)
			if err != nil {
				return p.fail(w, r, out, j, apierror.Upstream(http.StatusBadGateway, "The upstream sent a stream event the gateway cannot read; it was not passed on.", err))
			}
			if dropUsage && cr.usageOnly {
				continue
			}
			b = append(b, cr.out...)
			if cr.blocked {
				break
			}
		}
		if !bytes.HasSuffix(b, doneEvent) {
			tail, _ := scan.flush()
			b = append(b, tail...)
			if !bytes.HasSuffix(b, doneEvent) {
				b = append(b, doneEvent...)
			}
		}
		res = scan.result()
	} else {
		var err error
		b, _, res, err = checkAnswer(p.Redactor, ans.raw, ans.status == http.StatusOK)
		if err != nil {
			return p.fail(w, r, out, j, apierror.Upstream(http.StatusBadGateway, "The upstream sent an answer the gateway cannot read; it was not passed on.", err))
		}
	}
	if p.Redactor != nil {
		ex.Redacted(res.Counts)
		ex.Check(scope.Verdict{Check: scope.CheckRedaction, Verdict: "applied", Count: res.Total(), Blocked: res.Blocked})
	}
	if err := j.respond(r.Context(), ans.status, sha256Hex(b)); err != nil {
		return p.fail(w, r, out, j, err)
	}
	if ans.status == http.StatusOK {
		ex.Content(time.Now()) // a tool-call turn, released whole
	}
	if out != nil && ans.raw == nil {
		out.finish(nil, ans.status, b)
		return nil
	}
	if out != nil {
		if out.started() {
			// An error answer after keep-alives: it can only be an event now.
			out.finish(nil, ans.status, sseEvent(b))
			return nil
		}
		out.stop()
	}
	if ans.retryAfter != "" {
		// A provider's 429 or 503 passed on says when to come back, as
		// on the plain path.
		w.Header().Set("Retry-After", ans.retryAfter)
		apierror.FailFast(w.Header(), ans.status, time.Now())
	}
	httpx.WriteRawJSON(w, ans.status, b)
	return nil
}
