package sacp

import (
	"errors"
	"strings"
)

// Bounds on the sanitizer's work. Model output is untrusted, so every loop is
// linear in the input and the number of parse attempts is capped.
const (
	// maxCandidates is how many balanced {...} spans are kept and tried.
	// Spans that are kept never overlap, so parsing all of them reads each
	// input byte at most once.
	maxCandidates = 16
	// maxDepth is the deepest nesting accepted (encoding/json allows 10000).
	// Deeper text cannot be a reasonable SACP answer: the brace scanner drops
	// its open braces there, which keeps its stack (and the memory of an
	// input like "{{{{…") bounded, and the parser rejects such objects.
	maxDepth = 512
)

// errNoObject reports content without any balanced {...} span.
var errNoObject = errors.New("no JSON object found")

// bom is the UTF-8 byte order mark some clients and models prepend.
const bom = "\uFEFF"

// requiredFields are the keys that make an object look like a SACP answer.
var requiredFields = [...]string{"thought", "status", "data", "message"}

// Sanitize extracts the JSON object from a model's answer (SACP's lenient
// reading, docs/glossary.md): a leading UTF-8 BOM is dropped, then the
// balanced {...} spans of the text are found in one pass, ignoring braces
// inside JSON strings, and the first one that parses as a JSON object with the
// SACP shape is returned. Spans inside a ```json (or bare ```) fence win over
// the rest, so a fenced answer beats an example in the prose around it.
// Without a full SACP object the span with the most SACP keys wins, earliest
// first; so for plain JSON it is the first object that parses. Balanced
// matching is used instead of the protocol's own "last }" rule because prose
// after the object often contains braces too.
//
// The result is a substring of content (after the BOM), trimmed to the
// object's braces. ok is false when no span parses as a JSON object.
func Sanitize(content string) (string, bool) {
	obj, err := extract(content, false)
	return obj.text, err == nil
}

// candidate is a balanced span and, once tried, what parsing it gave.
type candidate struct {
	span
	tried bool
	obj   object
	err   error
}

// extract is Sanitize returning the parsed object, so Check does not parse it
// again, or the reason for a failure: the first candidate's parse error, or
// errNoObject. With decodeData the object's "data" is decoded for the schema.
func extract(content string, decodeData bool) (object, error) {
	content = strings.TrimPrefix(content, bom)
	x := extractor{s: content, decodeData: decodeData, fences: newFences(content)}
	x.maxRank = 2 * len(requiredFields)
	if x.fences.ok {
		x.maxRank++
	}
	x.scan()
	// Ranking below starts again from the top of the text.
	x.fences = newFences(content)
	if len(x.cands) == 0 {
		return object{}, errNoObject
	}
	var (
		best     *candidate
		bestRank = -1
		firstErr error
	)
	for i := range x.cands {
		c := &x.cands[i]
		x.try(c)
		if c.err != nil {
			if firstErr == nil {
				firstErr = c.err
			}
			continue
		}
		if r := x.rank(c); r > bestRank {
			best, bestRank = c, r
		}
	}
	if best == nil {
		return object{}, firstErr
	}
	return best.obj, nil
}

type extractor struct {
	s          string
	decodeData bool
	fences     fences // where the json fences are; queried in document order
	maxRank    int
	cands      []candidate // outermost spans in document order
}

// try parses c unless that was done during the scan.
func (x *extractor) try(c *candidate) {
	if c.tried {
		return
	}
	c.tried = true
	text := x.s[c.start:c.end]
	c.obj, c.err = parseObject(text, x.decodeData)
	if c.err == nil && len(c.obj.text) != len(text) {
		// Cannot happen: the scanner and the parser agree on strings and
		// braces. Kept so a disagreement degrades to "not an object".
		c.err = &syntaxError{"object does not end at its closing brace"}
	}
}

// rank orders parsed candidates: SACP keys present first, then being fenced.
// Candidates must be ranked in document order (see fences).
func (x *extractor) rank(c *candidate) int {
	r := 0
	for _, k := range requiredFields {
		if _, ok := c.obj.get(k); ok {
			r += 2
		}
	}
	if x.fences.contain(c.span) {
		r++
	}
	return r
}

// span is a half-open byte range [start, end) of the input.
type span struct{ start, end int }

// scan fills x.cands with up to maxCandidates balanced {...} spans that are
// not nested in another balanced span, in document order. It is a single
// forward pass: a stack of open-brace offsets, a flag for "inside a string"
// once an object is open, and the list of outermost spans closed so far. When
// a span closes, the spans it encloses are at the tail of that list and are
// dropped, so each span is appended and removed at most once.
//
// A '{' met outside any span is first parsed as JSON directly: that is the
// common case (one object in some prose) and it then costs a single pass. Only
// if that fails is the region scanned for braces; the parse error is kept for
// the span that '{' starts, so that span is not parsed again.
//
// Unbalanced text is recovered from without rescanning: an unclosed '{' in
// prose just stays on the stack, a raw newline inside a "string" proves the
// quote was prose (JSON strings cannot hold one) and resets the scan, and
// nesting deeper than maxDepth resets it too.
func (x *extractor) scan() {
	var (
		s         = x.s
		stack     []int // offsets of unclosed '{'
		inStr     bool
		bottomErr error // parse error of stack[0], when it was parsed directly
		failed    int   // direct parses that failed
	)
	for i := 0; i < len(s); {
		if len(stack) == 0 {
			// Outside any object: jump to the next '{' (vectorised search).
			j := strings.IndexByte(s[i:], '{')
			if j < 0 {
				return
			}
			i += j
			if failed >= maxCandidates {
				// Enough direct attempts failed: only scan from here on, so
				// text like `{"a":"⏎` repeated costs no parse (and no error)
				// per brace. The spans found are still tried afterwards.
				stack = append(stack, i)
				i++
				continue
			}
			obj, err := parseObject(s[i:], x.decodeData)
			if err != nil {
				failed++
				bottomErr = err
				stack = append(stack, i)
				i++
				continue
			}
			c := candidate{span: span{i, i + len(obj.text)}, tried: true, obj: obj}
			x.cands = append(x.cands, c)
			if len(x.cands) == maxCandidates || x.rank(&c) == x.maxRank {
				// Nothing later can be tried, or outrank this one.
				return
			}
			i = c.end
			continue
		}
		if inStr {
			j := strings.IndexByte(s[i:], '"')
			seg := s[i:]
			if j >= 0 {
				seg = s[i : i+j]
			}
			if k := strings.IndexByte(seg, '\n'); k >= 0 {
				stack, inStr, bottomErr = stack[:0], false, nil
				i += k + 1
				continue
			}
			if j < 0 {
				return // unterminated string: nothing more can close
			}
			q := i + j
			// The quote is escaped when an odd run of backslashes precedes
			// it; the run lies after i, so no byte is counted twice.
			n := 0
			for k := q - 1; k >= i && s[k] == '\\'; k-- {
				n++
			}
			inStr = n%2 == 1
			i = q + 1
			continue
		}
		switch s[i] {
		case '"':
			inStr = true
		case '{':
			if len(stack) == maxDepth {
				stack, bottomErr = stack[:0], nil
			}
			stack = append(stack, i)
		case '}':
			start := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for len(x.cands) > 0 && x.cands[len(x.cands)-1].start > start {
				x.cands = x.cands[:len(x.cands)-1]
			}
			c := candidate{span: span{start, i + 1}}
			if len(stack) == 0 && bottomErr != nil {
				c.tried, c.err, bottomErr = true, bottomErr, nil
			}
			if len(x.cands) < maxCandidates {
				x.cands = append(x.cands, c)
			}
			if len(stack) == 0 && len(x.cands) == maxCandidates {
				// Every kept span is closed at top level, so none can be
				// absorbed any more: the rest of the input cannot matter.
				return
			}
		}
		i++
	}
}

// fences walks the bodies of markdown code fences whose info string is
// "json" (any case) or empty. Fences are paired in order of appearance; an
// unclosed fence runs to the end, as when a model is cut off by max_tokens.
// It reads the text lazily and keeps only the current fence, so a text made
// of fences costs no memory; in exchange, spans must be asked about in
// document order.
type fences struct {
	s    string
	from int  // where the search for the next fence resumes
	body span // the current json fence body, when ok
	ok   bool // false once no json fence is left
}

// newFences returns a walk positioned on the first json fence, so ok tells
// whether the text has one at all. The zero fences has none.
func newFences(s string) fences {
	f := fences{s: s}
	f.advance()
	return f
}

// contain reports whether sp lies inside a json fence body.
func (f *fences) contain(sp span) bool {
	// Bodies are disjoint and in order: only the first one ending at or
	// after sp can contain it.
	for f.ok && f.body.end < sp.end {
		f.advance()
	}
	return f.ok && f.body.start <= sp.start
}

func (f *fences) advance() {
	const fence = "```"
	s := f.s
	for {
		j := strings.Index(s[f.from:], fence)
		if j < 0 {
			f.ok, f.from = false, len(s)
			return
		}
		open := f.from + j + len(fence)
		// The info string is the word right after the fence; models do not
		// always put a newline after it.
		k := open
		for k < len(s) && isInfoByte(s[k]) {
			k++
		}
		lang := s[open:k]
		end, next := len(s), len(s)
		if c := strings.Index(s[k:], fence); c >= 0 {
			end = k + c
			next = end + len(fence)
		}
		f.from = next
		if lang == "" || strings.EqualFold(lang, "json") {
			f.body, f.ok = span{k, end}, true
			return
		}
	}
}

func isInfoByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}
