package proxy

import (
	"slices"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/internal/jsonlex"
	"github.com/sacpgw/gateway/internal/scope"
	sj "github.com/sacpgw/gateway/internal/strictjson"
)

// chunkReader reads, in one pass over its bytes, a stream chunk of the
// shape nearly every event of a chat completion stream has:
//
//	{"id":"…","object":"chat.completion.chunk","created":N,"model":"…",
//	 "system_fingerprint":"…"|null,"service_tier":"…"|null,
//	 "choices":[{"index":N,"delta":{"role":"…","content":"…"|null,…},
//	             "finish_reason":"…"|null,"logprobs":null}],
//	 "usage":null|{"prompt_tokens":N,"completion_tokens":N,"total_tokens":N}}
//
// members in any order, each at most once, with the delta's text fields
// (content, refusal, reasoning_content, reasoning) as strings or null.
//
// The general way reads a chunk three times over (the strict walk that
// redacts, the decoding into answerShape, the search of the usage member)
// and the release notes read the result a fourth time; this reader does
// the work of all four for the chunks it knows, at a fraction of the cost
// and without allocating beyond the strings it hands to the redactor.
//
// It judges nothing it does not know: any other member or type, an
// escaped member name, a number other than a plain integer, a duplicate,
// a tool call, more choices than it holds, or anything the lexer refuses,
// and read returns false: the chunk goes the general way, which accepts
// or refuses it as it always did. For what it accepts, the general way
// accepts too and reaches the same result (FuzzChunkReader holds that).
// Tokens come from internal/jsonlex, the gateway's one set of JSON lexical
// rules, which are the strict walk's.
type chunkReader struct {
	data []byte
	pos  int
	// sh is the chunk as answerShape, for the code the two ways share:
	// the id, model and created, each choice's index and finish reason,
	// and a delta whose Content is the raw value (no tool calls, which
	// this reader leaves to the general way), and the usage.
	sh      answerShape
	index   [maxFastChoices]int
	finish  [maxFastChoices]string
	deltas  [maxFastChoices]answerDelta
	usage   scope.Usage
	strs    []chunkString
	members []memberSpan
	path    sj.Path
	// lastID and lastModel are the previous chunk's, reused when equal.
	lastID, lastModel string
	// out and cuts are the scanner's output and the usage member's
	// ranges, reused from chunk to chunk.
	out  []byte
	cuts [][2]int
}

// reset forgets the stream, keeping the buffers.
func (r *chunkReader) reset() {
	*r = chunkReader{sh: answerShape{Choices: r.sh.Choices[:0]}, strs: r.strs[:0], members: r.members[:0],
		path: r.path[:0], out: r.out[:0], cuts: r.cuts[:0]}
}

// maxFastChoices is the most choices a chunk read here may have (n > 4
// is rare; such chunks go the general way).
const maxFastChoices = 4

// chunkField is a string position this reader knows.
type chunkField uint8

const (
	fieldID chunkField = iota
	fieldObject
	fieldModel
	fieldSystemFingerprint
	fieldServiceTier
	fieldFinishReason
	fieldRole
	fieldContent
	fieldRefusal
	fieldReasoningContent
	fieldReasoning
)

// fieldNames are the member names of the chunkFields, as written.
var fieldNames = [...]string{
	fieldID: "id", fieldObject: "object", fieldModel: "model", fieldSystemFingerprint: "system_fingerprint",
	fieldServiceTier: "service_tier", fieldFinishReason: "finish_reason", fieldRole: "role", fieldContent: "content",
	fieldRefusal: "refusal", fieldReasoningContent: "reasoning_content", fieldReasoning: "reasoning",
}

// chunkString is one string value of the chunk: its token (quotes
// included) and where it sits.
type chunkString struct {
	start, end int
	escaped    bool
	field      chunkField
	choice     int // the choice's position in choices, for choice fields
}

// memberSpan is one top-level member of an object: from the end of what
// came before it (the '{' or the previous value) to the end of its value.
type memberSpan struct {
	name       string
	start, end int
}

// read reads data; false: not a chunk of the shape above (nothing is
// decided: the general way reads it).
func (r *chunkReader) read(data []byte) bool {
	r.data, r.pos = data, jsonlex.Space(data, 0)
	r.strs, r.members = r.strs[:0], r.members[:0]
	r.sh = answerShape{Choices: r.sh.Choices[:0]}
	prev := r.pos + 1 // just after the '{' (object refuses anything else)
	_, ok := r.object(false, func(name string) (uint32, bool) {
		bit, ok := r.topMember(name)
		r.members = append(r.members, memberSpan{name: name, start: prev, end: r.pos})
		prev = r.pos
		return bit, ok
	})
	if !ok || jsonlex.Space(data, r.pos) != len(data) {
		return false
	}
	r.fillStrings()
	return true
}

// topMember reads the value of the chunk's member name and returns the
// name's bit (for object).
func (r *chunkReader) topMember(name string) (uint32, bool) {
	switch name {
	case "id", "object", "model":
		return 1 << fieldOf(name), r.str(fieldOf(name), -1, false)
	case "system_fingerprint", "service_tier":
		return 1 << fieldOf(name), r.str(fieldOf(name), -1, true)
	case "created":
		var ok bool
		r.sh.Created, ok = r.integer()
		return 1 << 5, ok
	case "choices":
		return 1 << 6, r.choices()
	case "usage":
		return 1 << 7, r.readUsage()
	}
	return 0, false
}

// object reads an object whose '{' comes next: for each member, member
// reads the value and returns the name's bit (one of its own per name)
// and whether it read it. A name seen twice, or no member when empty is
// false, is not read here; seen is the bits of the names read.
func (r *chunkReader) object(empty bool, member func(name string) (uint32, bool)) (seen uint32, ok bool) {
	if !r.eat('{') {
		return 0, false
	}
	if r.eat('}') {
		return 0, empty
	}
	for {
		name, ok := r.name()
		if !ok {
			return 0, false
		}
		bit, ok := member(name)
		if !ok || seen&bit != 0 {
			return 0, false
		}
		seen |= bit
		if r.eat('}') {
			return seen, true
		}
		if !r.eat(',') {
			return 0, false
		}
	}
}

// fieldOf is the chunkField of a top-level string member.
func fieldOf(name string) chunkField {
	switch name {
	case "id":
		return fieldID
	case "object":
		return fieldObject
	case "model":
		return fieldModel
	case "system_fingerprint":
		return fieldSystemFingerprint
	}
	return fieldServiceTier
}

// eat consumes c, after whitespace.
func (r *chunkReader) eat(c byte) bool {
	r.pos = jsonlex.Space(r.data, r.pos)
	if r.pos < len(r.data) && r.data[r.pos] == c {
		r.pos++
		return true
	}
	return false
}

// name reads a member name and the colon after it. Only names written
// without escapes are read here.
func (r *chunkReader) name() (string, bool) {
	r.pos = jsonlex.Space(r.data, r.pos)
	if r.pos >= len(r.data) || r.data[r.pos] != '"' {
		return "", false
	}
	end, escaped, err := jsonlex.String(r.data, r.pos)
	if err != nil || escaped {
		return "", false
	}
	raw := r.data[r.pos+1 : end-1]
	r.pos = end
	if !r.eat(':') {
		return "", false
	}
	for _, n := range knownChunkNames {
		if string(raw) == n {
			return n, true
		}
	}
	return "", false
}

// knownChunkNames are every member name the reader knows, at any level.
var knownChunkNames = [...]string{
	"id", "object", "created", "model", "system_fingerprint", "service_tier", "choices", "usage",
	"index", "delta", "finish_reason", "logprobs",
	"role", "content", "refusal", "reasoning_content", "reasoning",
	"prompt_tokens", "completion_tokens", "total_tokens",
}

// str reads a string value (or null, when nullable) at field f of choice
// c (-1: a top-level field).
func (r *chunkReader) str(f chunkField, c int, nullable bool) bool {
	r.pos = jsonlex.Space(r.data, r.pos)
	if r.pos >= len(r.data) {
		return false
	}
	if r.data[r.pos] == 'n' {
		return nullable && r.null()
	}
	if r.data[r.pos] != '"' {
		return false
	}
	end, escaped, err := jsonlex.String(r.data, r.pos)
	if err != nil {
		return false
	}
	r.strs = append(r.strs, chunkString{start: r.pos, end: end, escaped: escaped, field: f, choice: c})
	r.pos = end
	return true
}

func (r *chunkReader) null() bool {
	end, err := jsonlex.Literal(r.data, r.pos, "null")
	r.pos = end
	return err == nil
}

// integer reads a number that is a plain non-negative integer of at most
// 18 digits (any other number is the general way's to judge).
func (r *chunkReader) integer() (int64, bool) {
	r.pos = jsonlex.Space(r.data, r.pos)
	start := r.pos
	if start >= len(r.data) || r.data[start] < '0' || r.data[start] > '9' {
		return 0, false
	}
	end, err := jsonlex.Number(r.data, start)
	if err != nil || end-start > 18 {
		return 0, false
	}
	var n int64
	for _, c := range r.data[start:end] {
		if c < '0' || c > '9' {
			return 0, false // a fraction or an exponent
		}
		n = n*10 + int64(c-'0')
	}
	r.pos = end
	return n, true
}

// choices reads the choices array.
func (r *chunkReader) choices() bool {
	if !r.eat('[') {
		return false
	}
	if r.eat(']') {
		return true
	}
	for {
		if len(r.sh.Choices) == maxFastChoices || !r.choice() {
			return false
		}
		if r.eat(']') {
			return true
		}
		if !r.eat(',') {
			return false
		}
	}
}

// choice reads one element of choices; its index is required.
func (r *chunkReader) choice() bool {
	c := len(r.sh.Choices)
	r.sh.Choices = slices.Grow(r.sh.Choices, 1)[:c+1]
	clear(r.sh.Choices[c:])
	seen, ok := r.object(false, func(name string) (uint32, bool) { return r.choiceMember(c, name) })
	return ok && seen&1 != 0
}

// choiceMember reads the member name of choice c (the index's bit is 1).
func (r *chunkReader) choiceMember(c int, name string) (uint32, bool) {
	ch := &r.sh.Choices[c]
	switch name {
	case "index":
		n, ok := r.integer()
		r.index[c] = int(n)
		ch.Index = &r.index[c]
		return 1, ok
	case "delta":
		r.deltas[c] = answerDelta{}
		ch.Delta = &r.deltas[c]
		_, ok := r.object(true, func(name string) (uint32, bool) { return r.deltaMember(c, name) })
		return 2, ok
	case "finish_reason":
		n := len(r.strs)
		ok := r.str(fieldFinishReason, c, true)
		if ok && len(r.strs) > n {
			r.finish[c] = "" // filled by fillStrings
			ch.FinishReason = &r.finish[c]
		}
		return 4, ok
	case "logprobs":
		return 8, r.nullValue()
	}
	return 0, false
}

// nullValue reads the value null.
func (r *chunkReader) nullValue() bool {
	r.pos = jsonlex.Space(r.data, r.pos)
	return r.pos < len(r.data) && r.data[r.pos] == 'n' && r.null()
}

// deltaMember reads the member name of choice c's delta: its role or
// one of its text fields.
func (r *chunkReader) deltaMember(c int, name string) (uint32, bool) {
	var f chunkField
	switch name {
	case "role":
		f = fieldRole
	case "content":
		f = fieldContent
	case "refusal":
		f = fieldRefusal
	case "reasoning_content":
		f = fieldReasoningContent
	case "reasoning":
		f = fieldReasoning
	default:
		return 0, false
	}
	start := jsonlex.Space(r.data, r.pos)
	ok := r.str(f, c, f != fieldRole)
	if f == fieldContent {
		r.deltas[c].Content = jsontext.Value(r.data[start:r.pos])
	}
	return 1 << f, ok
}

// readUsage reads the usage member: null, or an object of the three
// counts as plain integers, which scope.Usage then reads as it reads
// every usage report.
func (r *chunkReader) readUsage() bool {
	if r.nullValue() {
		return true
	}
	start := jsonlex.Space(r.data, r.pos)
	_, ok := r.object(false, func(name string) (uint32, bool) {
		var bit uint32
		switch name {
		case "prompt_tokens":
			bit = 1
		case "completion_tokens":
			bit = 2
		case "total_tokens":
			bit = 4
		default:
			return 0, false
		}
		_, ok := r.integer()
		return bit, ok
	})
	if !ok || r.usage.UnmarshalJSON(r.data[start:r.pos]) != nil {
		return false
	}
	r.sh.Usage = &r.usage
	return true
}

// fillStrings sets the shape's strings from the tokens read: the id,
// object and model (the same in every chunk of a stream, so the last
// chunk's strings are kept when they match) and the finish reasons. The
// role is not needed by the stream's code and is left out.
func (r *chunkReader) fillStrings() {
	for _, s := range r.strs {
		switch s.field {
		case fieldID:
			r.sh.ID = r.same(s, r.lastID)
			r.lastID = r.sh.ID
		case fieldObject:
			r.sh.Object = r.same(s, "chat.completion.chunk")
		case fieldModel:
			r.sh.Model = r.same(s, r.lastModel)
			r.lastModel = r.sh.Model
		case fieldFinishReason:
			r.finish[s.choice] = r.finishReason(s)
		}
	}
}

// same is the value of s: last when it is that string (no copy).
func (r *chunkReader) same(s chunkString, last string) string {
	if !s.escaped && string(r.data[s.start+1:s.end-1]) == last {
		return last
	}
	return r.text(s)
}

// text is the decoded value of s.
func (r *chunkReader) text(s chunkString) string {
	return jsonlex.Unquote(r.data[s.start+1:s.end-1], s.escaped)
}

var finishReasons = [...]string{"stop", "length", "tool_calls", "content_filter", "function_call"}

// finishReasonOf returns the usual finish reasons as constants.
func finishReasonOf(s string) string {
	for _, k := range finishReasons {
		if s == k {
			return k
		}
	}
	return s
}

// pathOf is the path of s as the strict walk gives it, in r.path.
func (r *chunkReader) pathOf(s chunkString) sj.Path {
	name := fieldNames[s.field]
	p := r.path[:0]
	switch s.field {
	case fieldID, fieldObject, fieldModel, fieldSystemFingerprint, fieldServiceTier:
	case fieldFinishReason:
		p = append(p, sj.Elem{Key: "choices", Index: -1}, sj.Elem{Index: s.choice})
	default:
		p = append(p, sj.Elem{Key: "choices", Index: -1}, sj.Elem{Index: s.choice}, sj.Elem{Key: "delta", Index: -1})
	}
	r.path = append(p, sj.Elem{Key: name, Index: -1})
	return r.path
}

// chunkNotes is what the release notes need of a chunk sent as written
// (onRelease): whether a delta carries text, and the finish reasons.
type chunkNotes struct {
	content bool
	finish  []string
}

// rewrite appends data to dst with every string visit changes replaced
// (quoted anew), as the strict walk's splice does, and the byte ranges in
// cuts left out (whole members, which hold no string: see memberCuts); it
// returns the notes of the result.
func (r *chunkReader) rewrite(dst []byte, visit sj.Visit, cuts [][2]int) ([]byte, chunkNotes) {
	var notes chunkNotes
	at := 0
	for _, s := range r.strs {
		raw := r.data[s.start+1 : s.end-1]
		// A structural value (an id, a role, a finish reason) is one visit
		// leaves as it is: it is not decoded into a string of its own.
		changed, out := false, ""
		if visit != nil && (s.escaped || !structuralAnswer(r.pathOf(s), unsafe.String(unsafe.SliceData(raw), len(raw)))) {
			v := r.text(s)
			if w, ok := visit(r.pathOf(s), v); ok && w != v {
				dst, cuts = copyCut(dst, r.data, at, s.start, cuts)
				dst, _ = jsontext.AppendQuote(dst, w)
				at, changed, out = s.end, true, w
			} else {
				out = v
			}
		}
		switch s.field {
		case fieldContent, fieldRefusal, fieldReasoningContent, fieldReasoning:
			notes.content = notes.content || changed && out != "" || !changed && len(raw) > 0
		case fieldFinishReason:
			if changed && out != "" {
				notes.finish = append(notes.finish, finishReasonOf(out))
			} else if !changed && len(raw) > 0 {
				notes.finish = append(notes.finish, r.finishReason(s))
			}
		}
	}
	dst, _ = copyCut(dst, r.data, at, len(r.data), cuts)
	return dst, notes
}

// finishReason is the decoded finish reason s, one of the usual ones
// without a copy.
func (r *chunkReader) finishReason(s chunkString) string {
	raw := r.data[s.start+1 : s.end-1]
	if !s.escaped {
		for _, k := range finishReasons {
			if string(raw) == k {
				return k
			}
		}
	}
	return r.text(s)
}

// copyCut appends data[from:to] to dst without the ranges of cuts that lie
// in it (cuts are in order and do not straddle from or to), and returns the
// cuts after to.
func copyCut(dst, data []byte, from, to int, cuts [][2]int) ([]byte, [][2]int) {
	for len(cuts) > 0 && cuts[0][1] <= to {
		dst = append(dst, data[from:cuts[0][0]]...)
		from, cuts = cuts[0][1], cuts[1:]
	}
	return append(dst, data[from:to]...), cuts
}
