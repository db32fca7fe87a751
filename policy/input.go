package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/sacpgw/gateway/internal/protocol"
	"github.com/sacpgw/gateway/internal/roster"
)

// Helpers that build the parts of the input documents that come from the
// configuration, with the names the policies read (docs/policy-authoring.md).
// Lists are []any and numbers int64 so that OPA converts them without a JSON
// round trip.

// AgentInput is input.agent: the registry entry without secrets.
func AgentInput(a *roster.Agent) map[string]any {
	if a == nil {
		return map[string]any{}
	}
	return map[string]any{
		"id":               a.ID,
		"type":             a.Type,
		"capabilities":     anyList(a.Capabilities),
		"allowed_targets":  anyList(a.AllowedTargets),
		"models":           anyList(a.Models),
		"max_request_size": int64(a.MaxRequestSize),
		"response_format":  a.ResponseFormat,
		"supported_verbs":  anyList(a.SupportedVerbs),
		"supported_tools":  anyList(a.SupportedTools),
		"tags":             anyList(a.Tags),
		"team":             a.Team,
	}
}

// ProtocolInput is input.protocol: protocol.yaml's approval protocol
// settings, sizes in bytes and timeouts in milliseconds.
func ProtocolInput(p protocol.Config) map[string]any {
	return map[string]any{
		"version": p.Version,
		"timeouts": map[string]any{
			"validation_ms": p.Timeouts.Validation.D().Milliseconds(),
			"response_ms":   p.Timeouts.Response.D().Milliseconds(),
			"escalation_ms": p.Timeouts.Escalation.D().Milliseconds(),
		},
		"limits": map[string]any{
			"max_content_size":   int64(p.Limits.MaxContentSize),
			"max_references":     int64(p.Limits.MaxReferences),
			"max_deviations":     int64(p.Limits.MaxDeviations),
			"max_retry_attempts": int64(p.Limits.MaxRetryAttempts),
		},
		"compliance": map[string]any{
			"strict_mode":        p.Compliance.StrictMode,
			"allow_deviations":   p.Compliance.AllowDeviations,
			"require_rationale":  p.Compliance.RequireRationale,
			"enforce_references": p.Compliance.EnforceReferences,
		},
	}
}

// AuthzInput is input.authz: the RBAC verdict.
func AuthzInput(a Authz) map[string]any {
	return map[string]any{"allowed": a.Allowed, "reason": a.Reason}
}

// StringsInput converts a string list (e.g. known_references) for the input.
func StringsInput(s []string) []any { return anyList(s) }

func anyList(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Preconvert converts a part of an input document that does not change
// between decisions (ProtocolInput, an agent's AgentInput, the known
// references) to OPA's representation once, so that decisions stop paying
// for it: put the result in the input map in place of v. The result is
// immutable and safe to share between concurrent decisions. A value OPA
// cannot represent is returned unchanged (the decision then fails closed).
func Preconvert(v any) any {
	if av, err := ast.InterfaceToValue(v); err == nil {
		return av
	}
	return v
}

// RawJSON is a JSON document that has passed the strict reading, placed
// as a value of an input map: the engine converts it (JSONInput) only when
// a decision reads the input, so that a request whose decision is
// input-free (computed when the policies loaded) is not converted at all.
type RawJSON []byte

// inputValue converts an input map, RawJSON and ChatRequest members
// through JSONInput.
func inputValue(input map[string]any) (ast.Value, error) {
	raw := false
	for _, v := range input {
		switch v.(type) {
		case RawJSON, ChatRequest:
			raw = true
		}
	}
	if !raw {
		return ast.InterfaceToValue(input)
	}
	kvs := make([][2]*ast.Term, 0, len(input))
	for k, v := range input {
		var val ast.Value
		var err error
		switch r := v.(type) {
		case RawJSON:
			val, err = JSONInput(r)
		case ChatRequest:
			if v, ok := r.Value.(ast.Value); ok {
				val = v // built by the reader's own pass over Body
				break
			}
			val, err = JSONInput(r.Body)
		default:
			val, err = ast.InterfaceToValue(v)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		kvs = append(kvs, [2]*ast.Term{ast.StringTerm(k), ast.NewTerm(val)})
	}
	return ast.NewObject(kvs...), nil
}

// JSONInput converts a JSON document that has passed the strict reading
// to OPA's representation in one pass over its bytes, the way the gateway
// read it: no second decoder with other rules, and no intermediate
// map[string]any for ast.InterfaceToValue to walk again. Numbers keep
// their literal text.
func JSONInput(data []byte) (ast.Value, error) {
	c := converters.Get().(*converter)
	defer c.release()
	c.rd.Reset(data)
	c.dec.Reset(&c.rd)
	v, err := c.value()
	if err != nil {
		return nil, fmt.Errorf("policy input: %w", err)
	}
	if _, err := c.dec.ReadToken(); err != io.EOF {
		return nil, errors.New("policy input: data after the JSON value")
	}
	return v, nil
}

// converter is the reusable state of one JSONInput: the decoder, and
// scratch stacks of the members and elements of the containers being
// read (each container takes its part off the top when it closes), so a
// conversion allocates what the result holds and little else. This runs
// for every chat request whose policy reads the input.
type converter struct {
	rd   bytes.Reader
	dec  *jsontext.Decoder
	keys []*ast.Term
	vals []ast.Value
}

var converters = sync.Pool{New: func() any {
	c := &converter{keys: make([]*ast.Term, 0, 32), vals: make([]ast.Value, 0, 32)}
	c.dec = jsontext.NewDecoder(&c.rd)
	return c
}}

func (c *converter) release() {
	// Each container clears its part of the stacks when it closes; what is
	// left is a failed conversion's.
	clear(c.keys)
	clear(c.vals)
	c.keys, c.vals = c.keys[:0], c.vals[:0]
	c.rd.Reset(nil)
	converters.Put(c)
}

// InputBuilder builds a request's policy value from a strict reader's walk
// over its body (it is the reader's strictjson.Sink), the value JSONInput
// would give for the same bytes: a request whose decision reads it is
// parsed once, by the reader. Get one with NewInputBuilder and hand it
// back with Release once its Value is taken.
type InputBuilder struct {
	c *converter
	// open are the containers being built, innermost last: the stack
	// heights where each one's members begin.
	open  []openContainer
	value ast.Value
	err   error
}

type openContainer struct {
	obj          bool
	kbase, vbase int
}

var builders = sync.Pool{New: func() any { return &InputBuilder{open: make([]openContainer, 0, 8)} }}

// NewInputBuilder returns an empty builder.
func NewInputBuilder() *InputBuilder {
	b := builders.Get().(*InputBuilder)
	b.c = converters.Get().(*converter)
	return b
}

// Begin implements strictjson.Sink.
func (b *InputBuilder) Begin(obj bool) {
	b.open = append(b.open, openContainer{obj: obj, kbase: len(b.c.keys), vbase: len(b.c.vals)})
}

// Name implements strictjson.Sink.
func (b *InputBuilder) Name(name string) { b.c.keys = append(b.c.keys, nameTermOf(name)) }

// Scalar implements strictjson.Sink.
func (b *InputBuilder) Scalar(raw jsontext.Value) {
	v, err := scalarValue(raw)
	if err != nil && b.err == nil {
		b.err = err
	}
	b.done(v)
}

// End implements strictjson.Sink.
func (b *InputBuilder) End() {
	if len(b.open) == 0 {
		b.err = errors.New("policy input: a container closed that was not open")
		return
	}
	top := b.open[len(b.open)-1]
	b.open = b.open[:len(b.open)-1]
	if top.obj {
		b.done(b.c.object(top.kbase, top.vbase))
		return
	}
	b.done(b.c.array(top.vbase))
}

// done places a finished value: in its container, or as the document.
func (b *InputBuilder) done(v ast.Value) {
	if len(b.open) == 0 {
		b.value = v
		return
	}
	b.c.vals = append(b.c.vals, v)
}

// Value is the document built, for ChatRequest.Value; nil when the walk
// did not hand over one whole value.
func (b *InputBuilder) Value() any {
	if b.err != nil || len(b.open) > 0 || b.value == nil {
		return nil
	}
	return b.value
}

// Release hands the builder back; its Value stays valid.
func (b *InputBuilder) Release() {
	b.c.release()
	b.c, b.value, b.err = nil, nil, nil
	b.open = b.open[:0]
	builders.Put(b)
}

// sharedTerms are the member names and values that recur in every chat
// request, made once: terms are immutable to OPA (it shares its own
// interned ones between evaluations the same way).
var sharedTerms = func() map[string]*ast.Term {
	m := map[string]*ast.Term{}
	for _, s := range []string{
		"model", "messages", "role", "content", "name", "tool_calls", "tool_call_id", "function", "arguments",
		"type", "text", "image_url", "url", "detail", "id", "stream", "stream_options", "include_usage",
		"temperature", "top_p", "max_tokens", "max_completion_tokens", "n", "stop", "tools", "tool_choice",
		"parameters", "description", "response_format", "json_schema", "schema", "strict", "user", "seed",
		"system", "assistant", "tool", "developer", "auto", "none", "required", "json_object", "input",
		"encoding_format", "dimensions", "refusal", "reasoning_effort", "metadata", "logprobs", "top_logprobs",
	} {
		m[s] = ast.StringTerm(s)
	}
	return m
}()

func (c *converter) value() (ast.Value, error) {
	switch c.dec.PeekKind() {
	case '{':
		if _, err := c.dec.ReadToken(); err != nil {
			return nil, err
		}
		kbase, vbase := len(c.keys), len(c.vals)
		for c.dec.PeekKind() != '}' {
			// ReadValue returns the quoted name; a name passed the
			// strict reading, so an escape-free one is its own text.
			raw, err := c.dec.ReadValue()
			if err != nil {
				return nil, err
			}
			k, err := nameTerm(raw)
			if err != nil {
				return nil, err
			}
			v, err := c.value()
			if err != nil {
				return nil, err
			}
			c.keys = append(c.keys, k)
			c.vals = append(c.vals, v)
		}
		if _, err := c.dec.ReadToken(); err != nil {
			return nil, err
		}
		return c.object(kbase, vbase), nil
	case '[':
		if _, err := c.dec.ReadToken(); err != nil {
			return nil, err
		}
		base := len(c.vals)
		for c.dec.PeekKind() != ']' {
			v, err := c.value()
			if err != nil {
				return nil, err
			}
			c.vals = append(c.vals, v)
		}
		if _, err := c.dec.ReadToken(); err != nil {
			return nil, err
		}
		return c.array(base), nil
	}
	raw, err := c.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	return scalarValue(raw)
}

// object is the object whose members are the top of the stacks, from
// kbase and vbase on; it takes them off.
func (c *converter) object(kbase, vbase int) ast.Value {
	keys, vals := c.keys[kbase:], c.vals[vbase:]
	terms := make([]ast.Term, len(vals)) // one allocation for the values' terms
	kvs := make([][2]*ast.Term, len(vals))
	for i, v := range vals {
		terms[i].Value = v
		kvs[i] = [2]*ast.Term{keys[i], &terms[i]}
	}
	clear(keys)
	clear(vals)
	c.keys, c.vals = c.keys[:kbase], c.vals[:vbase]
	return ast.NewObject(kvs...)
}

// array is the array whose elements are the top of the value stack, from
// base on; it takes them off.
func (c *converter) array(base int) ast.Value {
	vals := c.vals[base:]
	terms := make([]ast.Term, len(vals))
	elems := make([]*ast.Term, len(vals))
	for i, v := range vals {
		terms[i].Value = v
		elems[i] = &terms[i]
	}
	clear(vals)
	c.vals = c.vals[:base]
	return ast.NewArray(elems...)
}

// scalarValue is a string, number, true, false or null as written.
// Numbers keep their literal text.
func scalarValue(raw jsontext.Value) (ast.Value, error) {
	switch raw.Kind() {
	case '"':
		return stringValue(raw)
	case '0':
		return ast.Number(raw), nil
	case 't':
		return ast.Boolean(true), nil
	case 'f':
		return ast.Boolean(false), nil
	case 'n':
		return ast.Null{}, nil
	}
	return nil, fmt.Errorf("unexpected %v", raw.Kind())
}

// unquoted is the contents of a quoted JSON string the decoder returned
// (it passed the strict reading: an escape-free one is its own text).
func unquoted(raw jsontext.Value) ([]byte, error) {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner, nil
	}
	return jsontext.AppendUnquote(nil, raw)
}

// nameTerm is a member name as a term, shared when it is a common one.
func nameTerm(raw jsontext.Value) (*ast.Term, error) {
	s, err := unquoted(raw)
	if err != nil {
		return nil, err
	}
	if t, ok := sharedTerms[string(s)]; ok { // no allocation: a map lookup by []byte
		return t, nil
	}
	return ast.StringTerm(string(s)), nil
}

// nameTermOf is nameTerm of a name already unquoted.
func nameTermOf(name string) *ast.Term {
	if t, ok := sharedTerms[name]; ok {
		return t
	}
	return ast.StringTerm(name)
}

// stringValue is a string value, shared when it is a common one (a role).
func stringValue(raw jsontext.Value) (ast.Value, error) {
	s, err := unquoted(raw)
	if err != nil {
		return nil, err
	}
	if t, ok := sharedTerms[string(s)]; ok {
		return t.Value, nil
	}
	return ast.String(s), nil
}
