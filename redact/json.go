package redact

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/sacpgw/gateway/internal/jsonlex"
)

// maxJSONDepth matches encoding/json's nesting limit.
const maxJSONDepth = 10000

// JSON redacts every string of a JSON document, member names included (in
// objects, arrays, nested, or the document itself), and returns it as
// compact JSON. Numbers and the order of members are kept byte for byte; a
// string that needs no change keeps its original escaping. A masked member
// name that would repeat a sibling's gets a suffix "#2", "#3", ... so the
// object keeps one member per name (a reader would otherwise keep one of
// them, or refuse the document). It is used for the SACP fields message and
// data, envelopes' payloads and MCP messages. The error, for a document that
// is not valid JSON, gives the offset but none of the content.
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
		_, err := w.str()
		return err
	case c == 't' || c == 'f' || c == 'n':
		return w.literal(jsonlex.Word(c))
	case c == '-' || isDigit(c):
		return w.number()
	}
	return w.syntax("unexpected character")
}

// container copies an object or an array, redacting member names and
// values.
func (w *jsonWriter) container(depth int) error {
	open := w.s[w.i]
	end := byte(']')
	if open == '{' {
		end = '}'
	}
	start := len(w.out)
	w.out = append(w.out, open)
	w.i++
	w.space()
	if w.i < len(w.s) && w.s[w.i] == end {
		w.out = append(w.out, end)
		w.i++
		return nil
	}
	// masked lists the members whose name was masked (by position); nil,
	// and no cost, for the objects where none was.
	var masked []int
	for member := 0; ; member++ {
		if open == '{' {
			if w.i >= len(w.s) || w.s[w.i] != '"' {
				return w.syntax("expected a string key")
			}
			changed, err := w.str()
			if err != nil {
				return err
			}
			if changed {
				masked = append(masked, member)
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
			if masked != nil {
				return w.uniqueNames(start, masked)
			}
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

// str copies the string at w.i (a value or a member name), redacted;
// changed reports whether it was.
func (w *jsonWriter) str() (changed bool, err error) {
	start := w.i
	end, escaped, lerr := jsonlex.String(w.s, start)
	if lerr != nil {
		return false, w.lexical(lerr)
	}
	raw := w.s[start:end]
	w.i = end
	val := raw[1 : len(raw)-1]
	if escaped {
		w.scratch = jsonlex.AppendUnquoted(w.scratch[:0], val)
		val = string(w.scratch)
	}
	red, changed := w.r.redact(val, &w.res)
	if !changed {
		w.out = append(w.out, raw...)
		return false, nil
	}
	w.out = appendQuoted(w.out, red)
	return true, nil
}

// uniqueNames gives each masked name of the object written at
// w.out[start:] a form no sibling has: two addresses masked alike, or a
// masked name that equals one the document already had. The rare path: it
// reads back the object it wrote, and rewrites it only when a name must
// change. Names that were not masked are kept as they are (a document that
// repeated one is the reader's to refuse; the redactor accepts it).
func (w *jsonWriter) uniqueNames(start int, masked []int) error {
	members := objectNames(w.out[start:])
	taken := make(map[string]bool, len(members))
	isMasked := make(map[int]bool, len(masked))
	for _, m := range masked {
		isMasked[m] = true
	}
	for i, m := range members {
		if !isMasked[i] {
			taken[m.name] = true
		}
	}
	var renames map[int]string
	for _, i := range masked {
		name := members[i].name
		if taken[name] {
			alt, err := w.freeName(name, taken, len(members))
			if err != nil {
				return err
			}
			if renames == nil {
				renames = map[int]string{}
			}
			renames[i], name = alt, alt
		}
		taken[name] = true
	}
	if renames == nil {
		return nil
	}
	obj := append([]byte(nil), w.out[start:]...)
	w.out = w.out[:start]
	last := 0
	for i, m := range members {
		if alt, ok := renames[i]; ok {
			w.out = append(w.out, obj[last:m.start]...)
			w.out = appendQuoted(w.out, alt)
			last = m.end
		}
	}
	w.out = append(w.out, obj[last:]...)
	return nil
}

// freeName returns name with the first suffix "#n" that no sibling has and
// that no detector finds anything in (so redacting the output again still
// finds nothing); n stays below the number of members plus a margin.
func (w *jsonWriter) freeName(name string, taken map[string]bool, members int) (string, error) {
	for n := 2; n < members+100; n++ {
		alt := name + "#" + strconv.Itoa(n)
		if taken[alt] {
			continue
		}
		var res Result
		if _, found := w.r.redact(alt, &res); !found {
			return alt, nil
		}
	}
	return "", errors.New("redact: a masked member name has no form distinct from its siblings'")
}

// memberName is where a member name sits in an object the writer wrote.
type memberName struct {
	start, end int // the quoted name
	name       string
}

// objectNames lists the member names of obj, a compact object the writer
// wrote (so valid JSON without spaces).
func objectNames(obj []byte) []memberName {
	var out []memberName
	i := 1
	for i < len(obj) && obj[i] == '"' {
		end, escaped, _ := jsonlex.String(obj, i)
		out = append(out, memberName{start: i, end: end, name: jsonlex.Unquote(obj[i+1:end-1], escaped)})
		i = skipValue(obj, end+1) + 1 // past the value's ',' (or the '}')
	}
	return out
}

// skipValue returns the end of the value at s[i], in compact JSON the
// writer wrote.
func skipValue(s []byte, i int) int {
	depth := 0
	for {
		switch c := s[i]; {
		case c == '{' || c == '[':
			depth++
			i++
			continue
		case c == '}' || c == ']':
			depth--
			i++
		case c == ',' || c == ':':
			i++
			continue
		case c == '"':
			i, _, _ = jsonlex.String(s, i)
		default: // a number or a literal
			for i < len(s) && s[i] != ',' && s[i] != '}' && s[i] != ']' {
				i++
			}
		}
		if depth == 0 {
			return i
		}
	}
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
