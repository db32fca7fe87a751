package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/sacpgw/gateway/config"
)

// Helpers that build the parts of the input documents that come from the
// configuration, with the names the policies read (docs/policy-authoring.md).
// Lists are []any and numbers int64 so that OPA converts them without a JSON
// round trip.

// AgentInput is input.agent: the registry entry without secrets.
func AgentInput(a *config.Agent) map[string]any {
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
	}
}

// ProtocolInput is input.protocol: protocol.yaml's seed 004 settings, sizes
// in bytes and timeouts in milliseconds.
func ProtocolInput(p config.Protocol) map[string]any {
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

// inputValue converts an input map, RawJSON members through JSONInput.
func inputValue(input map[string]any) (ast.Value, error) {
	raw := false
	for _, v := range input {
		if _, ok := v.(RawJSON); ok {
			raw = true
			break
		}
	}
	if !raw {
		return ast.InterfaceToValue(input)
	}
	kvs := make([][2]*ast.Term, 0, len(input))
	for k, v := range input {
		var val ast.Value
		var err error
		if r, ok := v.(RawJSON); ok {
			val, err = JSONInput(r)
		} else {
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
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	v, err := jsonValue(dec)
	if err != nil {
		return nil, fmt.Errorf("policy input: %w", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("policy input: data after the JSON value")
	}
	return v, nil
}

func jsonValue(dec *jsontext.Decoder) (ast.Value, error) {
	switch dec.PeekKind() {
	case '{':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		var kvs [][2]*ast.Term
		for dec.PeekKind() != '}' {
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			k := ast.StringTerm(tok.String())
			v, err := jsonValue(dec)
			if err != nil {
				return nil, err
			}
			kvs = append(kvs, [2]*ast.Term{k, ast.NewTerm(v)})
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return ast.NewObject(kvs...), nil
	case '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		var elems []*ast.Term
		for dec.PeekKind() != ']' {
			v, err := jsonValue(dec)
			if err != nil {
				return nil, err
			}
			elems = append(elems, ast.NewTerm(v))
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return ast.NewArray(elems...), nil
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '"':
		return ast.String(tok.String()), nil
	case '0':
		return ast.Number(tok.String()), nil
	case 't', 'f':
		return ast.Boolean(tok.Bool()), nil
	case 'n':
		return ast.Null{}, nil
	}
	return nil, fmt.Errorf("unexpected %v", tok.Kind())
}
