package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"

	"github.com/sacpgw/gateway/redact"
)

// An approval binds the RFC 8785 form of a call, and that form is what the
// server receives: the bytes forwarded are the bytes hashed and shown to
// the person. RFC 8785 writes every number as the IEEE double nearest to
// it, so a value a double does not hold would be changed on the way
// (9007199254740993 becomes 9007199254740992, 0.10000000000000000001
// becomes 0.1): two calls the agent meant differently would share one
// approval, and the person would be shown a value the agent did not send.
// Such numbers are refused instead of rewritten.

// errNumberChanged marks a value whose canonical form would change one of
// its numbers.
var errNumberChanged = errors.New("a number that RFC 8785 would change")

// maxSafeInteger is I-JSON's largest integer every peer reads exactly
// (RFC 7493 2.2): 2^53-1.
const maxSafeInteger = "9007199254740991"

// canonicalForm returns v (a JSON value the strict reader accepted) in
// RFC 8785 form, or an error wrapping errNumberChanged when that form
// would change a number of v: an integer written as one beyond
// ±(2^53-1), or any number whose canonical text is another value than its
// literal. The error names no member and no value (either may be data the
// agent must not see echoed into logs).
func canonicalForm(v jsontext.Value) ([]byte, error) {
	if err := numbersKept(v); err != nil {
		return nil, err
	}
	out, err := jcs.Transform(v)
	if err != nil {
		return nil, fmt.Errorf("RFC 8785: %w", err)
	}
	return out, nil
}

// numbersKept checks every number of v.
func numbersKept(v jsontext.Value) error {
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unreadable JSON: %w", err)
		}
		if tok.Kind() == '0' {
			if err := numberKept(tok.String()); err != nil {
				return err
			}
		}
	}
}

// numberKept checks one number literal (JSON's grammar, already checked).
func numberKept(lit string) error {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return fmt.Errorf("%w: beyond a double's range", errNumberChanged)
	}
	if !strings.ContainsAny(lit, ".eE") {
		// Written as an integer: the tool may read it as one, exactly.
		digits := strings.TrimPrefix(lit, "-")
		if len(digits) > len(maxSafeInteger) || (len(digits) == len(maxSafeInteger) && digits > maxSafeInteger) {
			return fmt.Errorf("%w: an integer beyond ±(2^53-1)", errNumberChanged)
		}
	}
	canon, err := jcs.NumberToJSON(f)
	if err != nil {
		return fmt.Errorf("%w: %w", errNumberChanged, err)
	}
	if !sameDecimal(lit, canon) {
		return fmt.Errorf("%w: a decimal a double does not hold", errNumberChanged)
	}
	return nil
}

// sameDecimal reports whether two number literals are the same decimal
// value (-0 and 0 are). It compares digit strings, never a big number
// built from an exponent the agent chose.
func sameDecimal(a, b string) bool {
	an, ad, ae, aok := decimal(a)
	bn, bd, be, bok := decimal(b)
	return aok && bok && an == bn && ad == bd && ae == be
}

// decimal splits a number literal into its sign, its significant digits
// and the exponent of the last of them: 120.50 is (false, "1205", -1).
// Zero is (false, "", 0). ok is false for an exponent beyond ±10^6, far
// past any double (a canonical form never has one).
func decimal(s string) (neg bool, digits string, exp int, ok bool) {
	neg = strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant := s
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > 1e6 || e < -1e6 {
			return false, "", 0, false
		}
		exp = e
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits = strings.TrimLeft(whole+frac, "0")
	exp -= len(frac)
	if digits == "" {
		return false, "", 0, true
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	return neg, trimmed, exp, true
}

// outCall is what the server receives of a tools/call besides its name:
// the arguments and _meta redacted, then in RFC 8785 form, with their
// SHA-256 (metaSHA256 "" when the call has no _meta). A grant binds both
// hashes, and the review shows both values: what a person approves is
// what the server gets.
type outCall struct {
	args, meta             jsontext.Value
	argsSHA256, metaSHA256 string
	res                    redact.Result
}

// outgoingCall makes p's outCall. An error wraps errNumberChanged, or
// says the value could not be scanned for redaction.
func (t *turn) outgoingCall(p callParams) (outCall, error) {
	var out outCall
	var err error
	if out.args, out.res, err = t.outgoingValue(p.Arguments); err != nil {
		return outCall{}, fmt.Errorf("arguments: %w", err)
	}
	out.argsSHA256 = sha256Hex(out.args)
	if p.Meta != nil {
		var res redact.Result
		if out.meta, res, err = t.outgoingValue(p.Meta); err != nil {
			return outCall{}, fmt.Errorf("_meta: %w", err)
		}
		out.res.Add(res)
		out.metaSHA256 = sha256Hex(out.meta)
	}
	return out, nil
}

// outgoingValue is v redacted, in RFC 8785 form.
func (t *turn) outgoingValue(v jsontext.Value) (jsontext.Value, redact.Result, error) {
	red, res, err := t.redactJSON(v)
	if err != nil {
		return nil, res, err
	}
	canon, err := canonicalForm(red)
	return canon, res, err
}

// refuseUnchanged refuses, audited, a call whose arguments or _meta cannot
// be passed on exactly as hashed.
func (t *turn) refuseUnchanged(ctx context.Context, m *message, a *answer, rec *record, label string, err error) {
	rec.set("decision", "invalid")
	msg := "The call was refused: its arguments cannot be scanned for redaction."
	if errors.Is(err, errNumberChanged) {
		rec.set("reason", "a number RFC 8785 would change")
		msg = "The call was refused: a number in its arguments or _meta would reach the server changed (the gateway passes on " +
			"the RFC 8785 form it binds approvals to: integers within ±(2^53-1), and a decimal only when the nearest " +
			"IEEE double writes back as the same value). Send such a value as a string."
	} else {
		rec.set("reason", "unscannable")
	}
	t.refuse(ctx, m, a, rec, label, "invalid", codeInvalidParams, msg, nil)
}
