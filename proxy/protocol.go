package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sacpgw/gateway/compact"
	"github.com/sacpgw/gateway/config"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/scope"
	sj "github.com/sacpgw/gateway/internal/strictjson"
	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/sacp"
)

// Protocol enforces the response protocols: for agents with response_format
// json_standard, the SACP JSON protocol of seed 000 (it injects the template,
// calls the model, sanitizes and validates the answer, asks again with the
// errors while attempts remain, falls back to seed 000 7.2's wrapper, redacts
// the fields in apply_to, and answers with the validated object); for
// sacp_compact, seed 001's compact messages the same way (see compact.go).
type Protocol struct {
	Template sacp.Template
	// CompactTemplates holds each sacp_compact agent's Appendix C prompt,
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
	Audit     *httpx.Recorder
	// Policies applies the guardrails to validated answers; nil: none.
	Policies Policies
	// AgentInputs are the agents' policy input documents.
	AgentInputs AgentInputs
}

// NewProtocol builds the protocol stage from config, compiling every
// protocol agent's data schema once.
func NewProtocol(cfg *config.Config, red *redact.Redactor, rec *httpx.Recorder) (*Protocol, error) {
	tplPath := ""
	if f := cfg.Protocol.SACP.TemplateFile; f != "" {
		tplPath = cfg.Dir + "/" + f
	}
	tpl, err := sacp.LoadTemplate(tplPath)
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
func (p *Protocol) Applies(a *config.Agent) bool { return a.StandardProtocol() || isCompact(a) }

// Inject is the request stage that appends the agent's protocol prompt to
// the system prompt of its request and records the prompt's hash.
func (p *Protocol) Inject(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	ex := scope.Get(r.Context())
	if !p.Applies(ex.Agent) {
		ex.Check(scope.Verdict{Check: scope.CheckProtocol, Verdict: "not_applicable"})
		next.ServeHTTP(w, r)
		return nil
	}
	var opts struct {
		N *int `json:"n"`
	}
	_ = json.Unmarshal(ex.Body, &opts)
	if opts.N != nil && *opts.N > 1 {
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

// answer is one model answer, from a JSON body or a gathered stream.
type answer struct {
	status    int
	id, model string
	created   int64
	content   string
	finish    string
	toolCalls bool
	usage     scope.Usage
	hasUsage  bool
	// raw is the upstream body (JSON) or the SSE events (stream), replayed
	// unchanged for tool calls and upstream errors.
	raw    []byte
	events [][]byte
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

// standardChecker is the json_standard format (seed 000).
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
	if outcome.Valid {
		// Guardrails judge what the model said (SPEC 4.1: every validated
		// answer); the fallback wrapper is the gateway's own words.
		guard(ctx, p.Policies, p.AgentInputs, ex, &resp)
	} else {
		resp = sacp.Fallback(content)
	}
	blocked := p.redactResponse(ex, &resp)
	ex.SACP = &scope.SACPOutcome{Status: resp.Status, Valid: outcome.Valid, Attempts: ex.Attempts, Errors: outcome.Errors,
		Thought: p.auditText(resp.Thought), Message: resp.Message}
	return settled{content: string(resp.Compact()), status: resp.Status, valid: outcome.Valid, blocked: blocked != ""}
}

// Serve is the endpoint for protocol agents.
func (p *Protocol) Serve(w http.ResponseWriter, r *http.Request) error {
	ex := scope.Get(r.Context())
	up := ex.Route
	if up == nil {
		return apierror.ModelNotFound(ex.Model)
	}
	ctx, cancel := context.WithTimeoutCause(r.Context(), p.Timeout, errTimeout)
	defer cancel()
	j := &journal{rec: p.Audit, ex: ex}
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
	var (
		ans   *answer
		total scope.Usage
		err   error
	)
	for attempt := 1; ; attempt++ {
		ex.Attempts = attempt
		sent := time.Now()
		ans, err = p.call(ctx, r, ex, body)
		ex.UpstreamTime += time.Since(sent)
		if err != nil {
			return p.fail(w, r, out, j, upstreamError(ctx, up.Name, p.Timeout, err))
		}
		total.PromptTokens += ans.usage.PromptTokens
		total.CompletionTokens += ans.usage.CompletionTokens
		total.TotalTokens += ans.usage.TotalTokens
		ex.Usage, ex.UsageKnown = total, ex.UsageKnown || ans.hasUsage
		if ans.status != http.StatusOK || ans.toolCalls {
			break
		}
		valid, errs := chk.Check(ans.content)
		if valid || !p.Reask || attempt >= p.MaxAttempts {
			break
		}
		body, err = reaskBody(body, ans.content, chk.Reask(errs))
		if err != nil {
			return p.fail(w, r, out, j, fmt.Errorf("re-ask: %w", err))
		}
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
		// Tool loop (seed 000 8, phase 1): not yet the final synthesis.
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
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
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
	out.finish(h, http.StatusOK, all)
	return nil
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

// redactResponse redacts the apply_to fields in place, counting on the
// Exchange; it returns the blocking detector's name if one matched.
func (p *Protocol) redactResponse(ex *scope.Exchange, resp *sacp.Response) string {
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
		if out, r, err := p.Redactor.JSON(resp.Data); err == nil {
			resp.Data = out
			res.Add(r)
		}
	}
	ex.Redacted(res.Counts)
	ex.Check(scope.Verdict{Check: scope.CheckRedaction, Verdict: "applied", Count: res.Total(), Fields: sortedFields(p.ApplyTo)})
	return res.Blocked
}

func sortedFields(m map[string]bool) []string {
	var out []string
	for _, f := range config.SACPFields {
		if m[f] {
			out = append(out, f)
		}
	}
	return out
}

// call makes one model call; a stream is gathered whole.
func (p *Protocol) call(ctx context.Context, r *http.Request, ex *scope.Exchange, body []byte) (*answer, error) {
	resp, err := send(ctx, r.Header, ex, r.URL.Path, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ans := &answer{status: resp.StatusCode}
	media := mediaType(resp.Header.Get("Content-Type"))
	if ans.status == http.StatusOK && media == "text/event-stream" {
		return ans, gather(resp.Body, ans)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerSize+1))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if len(raw) > maxAnswerSize {
		return nil, &upstreamStatusError{tooLarge: true}
	}
	ans.raw = raw
	// Read once, strictly: an answer of unknown shape is refused, never
	// validated or replayed.
	if media != "application/json" {
		return nil, &upstreamStatusError{shape: "an answer of type " + strconv.Quote(media)}
	}
	if err := sj.Check(raw, answerFields); err != nil {
		return nil, &upstreamStatusError{shape: err.Error()}
	}
	if ans.status != http.StatusOK {
		return ans, nil
	}
	sh, err := decodeShape(raw, false)
	if err != nil {
		return nil, &upstreamStatusError{shape: err.Error()}
	}
	ans.id, ans.created, ans.model = sh.ID, sh.Created, sh.Model
	if sh.Usage != nil {
		ans.usage, ans.hasUsage = *sh.Usage, true
	}
	if len(sh.Choices) > 0 {
		if m := sh.Choices[0].Message; m != nil {
			_ = json.Unmarshal(m.Content, &ans.content) // text; parts are not a protocol answer
			ans.toolCalls = len(m.ToolCalls) > 0
		}
		if fr := sh.Choices[0].FinishReason; fr != nil {
			ans.finish = *fr
		}
	}
	return ans, nil
}

// gather reads a whole SSE answer (per the WHATWG rules, like every
// stream the gateway reads): the content deltas of choice 0, tool calls,
// finish reason and usage, keeping each event's data for replay. An event
// of unknown shape refuses the whole answer.
func gather(body io.Reader, ans *answer) error {
	sr := newSSEReader(body)
	var content strings.Builder
	for {
		msg, err := sr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read stream: %w", err)
		}
		if msg.comment {
			continue
		}
		if msg.name != "" && msg.name != "message" {
			return &upstreamStatusError{shape: "a stream event named " + strconv.Quote(msg.name)}
		}
		if string(msg.data) == "[DONE]" {
			break
		}
		if err := sj.Check(msg.data, answerFields); err != nil {
			return &upstreamStatusError{shape: err.Error()}
		}
		c, err := decodeShape(msg.data, true)
		if err != nil {
			return &upstreamStatusError{shape: err.Error()}
		}
		ans.events = append(ans.events, msg.data)
		gatherEvent(c, ans, &content)
	}
	ans.content = content.String()
	return nil
}

func gatherEvent(c *answerShape, ans *answer, content *strings.Builder) {
	if ans.id == "" {
		ans.id, ans.created, ans.model = c.ID, c.Created, c.Model
	}
	if c.Usage != nil {
		ans.usage, ans.hasUsage = *c.Usage, true
	}
	for _, ch := range c.Choices {
		if *ch.Index != 0 {
			continue
		}
		if d := ch.Delta; d != nil {
			var text string
			if json.Unmarshal(d.Content, &text) == nil {
				content.WriteString(text)
			}
			if len(d.ToolCalls) > 0 {
				ans.toolCalls = true
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			ans.finish = *ch.FinishReason
		}
	}
}

// reaskBody appends the invalid answer and the re-ask prompt (which lists
// the validation errors) to the conversation, keeping every other field of
// the request.
func reaskBody(body []byte, invalid, prompt string) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(doc["messages"], &msgs); err != nil {
		return nil, err
	}
	a, _ := json.Marshal(map[string]string{"role": "assistant", "content": invalid})
	u, _ := json.Marshal(map[string]string{"role": "user", "content": prompt})
	msgs = append(msgs, a, u)
	doc["messages"], _ = json.Marshal(msgs)
	return json.Marshal(doc)
}

// fail answers with err: in OpenAI's error shape before anything was sent,
// or as an SSE error event once keep-alives committed the stream.
func (p *Protocol) fail(w http.ResponseWriter, r *http.Request, out *sseOut, j *journal, err error) error {
	ex := j.ex
	if r.Context().Err() != nil {
		ex.ErrCode, ex.Err = "client_closed_request", err
		p.auditFailure(r.Context(), j, 499)
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
	out.finish(nil, e.Status, sseEvent(bytes.TrimSuffix(e.JSON(), []byte("\n"))))
	p.auditFailure(r.Context(), j, e.Status)
	return nil
}

func (p *Protocol) auditFailure(ctx context.Context, j *journal, status int) {
	ex := j.ex
	if _, ok := ex.Verdict(scope.CheckProtocol); !ok {
		c := scope.Verdict{Check: scope.CheckProtocol, Verdict: "no_answer", TemplateSHA256: p.templateFor(ex.Agent).SHA256}
		if isCompact(ex.Agent) {
			c.Format = FormatCompact
		}
		ex.Check(c)
	}
	_ = j.respond(ctx, status, "")
}

// replay passes on a provider's 4xx error or a tool-call turn, read and
// redacted by the same rules as every answer (tool call arguments
// included).
func (p *Protocol) replay(w http.ResponseWriter, r *http.Request, out *sseOut, j *journal, ans *answer, dropUsage bool) error {
	ex := j.ex
	var b []byte
	var res redact.Result
	if out != nil && ans.raw == nil {
		scan := newChunkScanner(p.Redactor)
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
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(ans.status)
	_, _ = w.Write(b)
	return nil
}

type completionMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type completionChoice struct {
	Index        int               `json:"index"`
	Message      completionMessage `json:"message"`
	FinishReason string            `json:"finish_reason"`
}

type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *scope.Usage       `json:"usage,omitempty"`
}

func completionJSON(ans *answer, content, finish string, usage scope.Usage, withUsage bool) []byte {
	c := completion{ID: ans.id, Object: "chat.completion", Created: ans.created, Model: ans.model,
		Choices: []completionChoice{{Message: completionMessage{Role: "assistant", Content: content}, FinishReason: finish}}}
	if withUsage {
		c.Usage = &usage
	}
	b, _ := json.Marshal(c)
	return b
}

// streamChunkSize is how much content one re-emitted chunk carries.
const streamChunkSize = 64

// streamEvents renders the validated answer as an OpenAI SSE stream: a role
// chunk, content chunks, the finish chunk, a usage chunk if the client
// asked for one, and [DONE].
func streamEvents(ans *answer, content, finish string, usage scope.Usage, withUsage bool) [][]byte {
	type delta struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content,omitempty"`
	}
	type choice struct {
		Index        int     `json:"index"`
		Delta        delta   `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	}
	type chunk struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []choice     `json:"choices"`
		Usage   *scope.Usage `json:"usage,omitempty"`
	}
	var out [][]byte
	emit := func(c chunk) {
		c.ID, c.Object, c.Created, c.Model = ans.id, "chat.completion.chunk", ans.created, ans.model
		b, _ := json.Marshal(c)
		out = append(out, append(append([]byte("data: "), b...), '\n', '\n'))
	}
	empty := ""
	emit(chunk{Choices: []choice{{Delta: delta{Role: "assistant", Content: &empty}}}})
	for i := 0; i < len(content); {
		j := min(len(content), i+streamChunkSize)
		for j < len(content) && j > i && !utf8Start(content[j]) {
			j-- // never split a UTF-8 sequence across chunks
		}
		piece := content[i:j]
		emit(chunk{Choices: []choice{{Delta: delta{Content: &piece}}}})
		i = j
	}
	emit(chunk{Choices: []choice{{Delta: delta{}, FinishReason: &finish}}})
	if withUsage {
		u := usage
		emit(chunk{Choices: []choice{}, Usage: &u})
	}
	out = append(out, []byte("data: [DONE]\n\n"))
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// sseOut writes a protocol agent's stream: nothing until the answer is
// ready, except SSE comment keep-alives while the model is being asked
// (and asked again). Headers are committed by the first keep-alive, so the
// X-SACP-* values then travel as HTTP trailers.
type sseOut struct {
	w       http.ResponseWriter
	mu      sync.Mutex
	timer   *time.Timer
	every   time.Duration
	begun   bool
	stopped bool
}

const sacpTrailers = "X-SACP-Status, X-SACP-Valid, X-SACP-Attempts"

func newSSEOut(w http.ResponseWriter, every time.Duration) *sseOut {
	o := &sseOut{w: w, every: every}
	if every > 0 {
		// The timer may fire before AfterFunc returns: publish it under the lock.
		o.mu.Lock()
		o.timer = time.AfterFunc(every, o.keepAlive)
		o.mu.Unlock()
	}
	return o
}

func (o *sseOut) keepAlive() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return
	}
	if !o.begun {
		// Declared before the headers go out, so the X-SACP-* values can
		// follow the body as trailers.
		o.w.Header().Set("Trailer", sacpTrailers)
		o.begin(http.StatusOK)
	}
	// A comment line without the blank line that would end an event: some
	// SDKs (openai-go v1) dispatch an empty event on ": x\n\n" and fail to
	// decode it, while every SSE parser skips a lone comment line.
	_, _ = io.WriteString(o.w, ": keep-alive\n")
	_ = http.NewResponseController(o.w).Flush()
	o.timer.Reset(o.every)
}

// begin writes the stream's headers; o.mu must be held.
func (o *sseOut) begin(status int) {
	o.begun = true
	writeSSEHeader(o.w, status)
}

func (o *sseOut) started() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.begun
}

func (o *sseOut) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stopped = true
	if o.timer != nil {
		o.timer.Stop()
	}
}

// finish stops the keep-alives and writes the final events; h are the
// X-SACP-* values (headers if nothing was sent yet, else trailers).
func (o *sseOut) finish(h map[string]string, status int, body []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stopped = true
	if o.timer != nil {
		o.timer.Stop()
	}
	if !o.begun {
		for k, v := range h {
			o.w.Header().Set(k, v)
		}
		if status != http.StatusOK {
			o.w.Header().Set("Content-Type", "text/event-stream")
			o.begun = true
			o.w.WriteHeader(status)
		} else {
			o.begin(status)
		}
	} else {
		for k, v := range h {
			o.w.Header().Set(k, v) // declared in Trailer: sent after the body
		}
	}
	_, _ = o.w.Write(body)
	_ = http.NewResponseController(o.w).Flush()
}
