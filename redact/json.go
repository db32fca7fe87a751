package redact

import (
	"fmt"

	"github.com/sacpgw/gateway/internal/jsonlex"
)

// maxJSONDepth matches encoding/json's nesting limit.
const maxJSONDepth = 10000

// JSON redacts every string value of a JSON document (in objects, arrays,
// nested, or the document itself) and returns it as compact JSON. Keys,
// numbers and the order of members are kept byte for byte; a string that
// needs no change keeps its original escaping. It is used for the SACP
// fields message and data. The error, for a document that is not valid
// JSON, gives the offset but none of the content.
//
// The document is parsed in one pass by hand rather than through
// encoding/json: decoding into maps would reorder keys and round numbers,
// and costs several times more. Its tokens come from internal/jsonlex, the
// gateway's one set of JSON lexical rules, so a document that the readers
// before it accepted (the SACP validator, compact SACP, the envelopes) is
// one it reads the same way; invalid UTF-8 and unpaired surrogate escapes
// are refused like everywhere else.
func (r *Redactor) JSON(raw []byte) ([]byte, Result, error) {
	w := jsonWriter{r: r, s: string(raw), out: make([]byte, 0, len(raw))}
	w.space()
	if err := w.value(0); err != nil {
		return nil, Result{}, err
	}
	w.space()
	if w.i < len(w.s) {
		return nil, Result{}, w.syntax("data after the top-level value")
	}
	return w.out, w.res, nil
}

type jsonWriter struct {
	r       *Redactor
	s       string
	i       int
	out     []byte
	res     Result
	scratch []byte // decoded string values
}

func (w *jsonWriter) syntax(what string) error {
	return fmt.Errorf("redact: invalid JSON at offset %d: %s", w.i, what)
}

func (w *jsonWriter) space() { w.i = jsonlex.Space(w.s, w.i) }

func (w *jsonWriter) value(depth int) error {
	if w.i >= len(w.s) {
		return w.syntax("unexpected end")
	}
	switch c := w.s[w.i]; {
	case c == '{' || c == '[':
		if depth >= maxJSONDepth {
			return w.syntax("nested too deep")
		}
		return w.container(depth)
	case c == '"':
		return w.str(true)
	case c == 't':
		return w.literal("true")
	case c == 'f':
		return w.literal("false")
	case c == 'n':
		return w.literal("null")
	case c == '-' || isDigit(c):
		return w.number()
	}
	return w.syntax("unexpected character")
}

// container copies an object or an array; member keys are copied as they
// are, values are redacted.
func (w *jsonWriter) container(depth int) error {
	open := w.s[w.i]
	end := byte(']')
	if open == '{' {
		end = '}'
	}
	w.out = append(w.out, open)
	w.i++
	w.space()
	if w.i < len(w.s) && w.s[w.i] == end {
		w.out = append(w.out, end)
		w.i++
		return nil
	}
	for {
		if open == '{' {
			if w.i >= len(w.s) || w.s[w.i] != '"' {
				return w.syntax("expected a string key")
			}
			if err := w.str(false); err != nil {
				return err
			}
			w.space()
			if w.i >= len(w.s) || w.s[w.i] != ':' {
				return w.syntax("expected ':'")
			}
			w.out = append(w.out, ':')
			w.i++
			w.space()
		}
		if err := w.value(depth + 1); err != nil {
			return err
		}
		w.space()
		if w.i >= len(w.s) {
			return w.syntax("unexpected end")
		}
		switch w.s[w.i] {
		case ',':
			w.out = append(w.out, ',')
			w.i++
			w.space()
		case end:
			w.out = append(w.out, end)
			w.i++
			return nil
		default:
			return w.syntax("expected ',' or '" + string(end) + "'")
		}
	}
}

func (w *jsonWriter) literal(lit string) error {
	end, err := jsonlex.Literal(w.s, w.i, lit)
	if err != nil {
		return w.lexical(err)
	}
	w.out = append(w.out, w.s[w.i:end]...)
	w.i = end
	return nil
}

func (w *jsonWriter) number() error {
	end, err := jsonlex.Number(w.s, w.i)
	if err != nil {
		return w.lexical(err)
	}
	w.out = append(w.out, w.s[w.i:end]...)
	w.i = end
	return nil
}

// lexical reports a token jsonlex refused, at its offset.
func (w *jsonWriter) lexical(e *jsonlex.Error) error {
	w.i = e.Off
	return w.syntax(e.Kind.String())
}

// str copies the string at w.i, redacting it when it is a value.
func (w *jsonWriter) str(redact bool) error {
	start := w.i
	end, escaped, err := jsonlex.String(w.s, start)
	if err != nil {
		return w.lexical(err)
	}
	raw := w.s[start:end]
	w.i = end
	if !redact {
		w.out = append(w.out, raw...)
		return nil
	}
	val := raw[1 : len(raw)-1]
	if escaped {
		w.scratch = jsonlex.AppendUnquoted(w.scratch[:0], val)
		val = string(w.scratch)
	}
	red, changed := w.r.redact(val, &w.res)
	if !changed {
		w.out = append(w.out, raw...)
		return nil
	}
	w.out = appendQuoted(w.out, red)
	return nil
}

// jsonSpecial8 reports whether any of the eight bytes in x ends or escapes
// a JSON string or is a control byte ('"', '\\', < 0x20). Each test is the
// exact "has a byte below n" bit trick: a borrow reaches a byte's top bit
// only from a byte that matched.
func jsonSpecial8(x uint64) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	q, b := x^(ones*'"'), x^(ones*'\\')
	return ((q-ones)&^q|(b-ones)&^b|(x-ones*0x20)&^x)&tops != 0
}

// quoteSpecial8 is jsonSpecial8 plus 0xe2, the lead byte of U+2028/U+2029.
func quoteSpecial8(x uint64) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	e := x ^ (ones * 0xe2)
	return jsonSpecial8(x) || (e-ones)&^e&tops != 0
}

// appendQuoted appends v as a JSON string. It escapes what JSON requires
// and U+2028/U+2029, which break JavaScript; other bytes, including invalid
// UTF-8 that came in, pass unchanged.
func appendQuoted(b []byte, v string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	last := 0
	for i := 0; i < len(v); i++ {
		for i+8 <= len(v) && !quoteSpecial8(load64(v, i)) {
			i += 8
		}
		if i >= len(v) {
			break
		}
		c := v[i]
		var esc string
		switch {
		case c == '"':
			esc = `\"`
		case c == '\\':
			esc = `\\`
		case c == '\n':
			esc = `\n`
		case c == '\r':
			esc = `\r`
		case c == '\t':
			esc = `\t`
		case c < 0x20:
			b = append(b, v[last:i]...)
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			last = i + 1
			continue
		case c == 0xe2 && i+2 < len(v) && v[i+1] == 0x80 && (v[i+2] == 0xa8 || v[i+2] == 0xa9):
			b = append(b, v[last:i]...)
			b = append(b, `\u202`...)
			b = append(b, hex[v[i+2]&0xf])
			i += 2
			last = i + 1
			continue
		default:
			continue
		}
		b = append(b, v[last:i]...)
		b = append(b, esc...)
		last = i + 1
	}
	b = append(b, v[last:]...)
	return append(b, '"')
}
