package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/internal/jsonlex"
	"github.com/sacpgw/gateway/internal/scope"
	sj "github.com/sacpgw/gateway/internal/strictjson"
	"github.com/sacpgw/gateway/redact"
)

// redactDoc reads body strictly against fields and redacts every string
// except the structural ones (nil r: the strict reading alone), and every
// member name that is not one of fields' known ones: a name is the
// caller's text like a value (metadata keys, logit_bias, a schema's
// properties). Tool call arguments that hold JSON are redacted inside,
// names and strings, so an escape such as \u0040 cannot hide an e-mail
// address from the detectors. onBlock, if set, is told the path of each
// string or name a blocking detector matched.
func redactDoc(r *redact.Redactor, body []byte, fields *sj.Fields, structural func(sj.Path, string) bool, onBlock func(sj.Path)) ([]byte, redact.Result, error) {
	var res redact.Result
	if r == nil {
		return body, res, sj.Check(body, fields)
	}
	scan := func(p sj.Path, s string, arguments bool) (string, bool) {
		o, rr := redactText(r, s, arguments)
		res.Add(rr)
		if rr.Blocked != "" && onBlock != nil {
			onBlock(p)
		}
		return o, o != s
	}
	out, _, err := sj.RewriteNames(body, fields, func(p sj.Path, s string) (string, bool) {
		if structural(p, s) {
			return s, false
		}
		return scan(p, s, isArguments(p))
	}, func(p sj.Path, name string) (string, bool) {
		return scan(p, name, false)
	})
	return out, res, err
}

// redactText redacts one string or member name: a tool call's arguments
// inside (redactArguments), anything else as a whole text.
func redactText(r *redact.Redactor, s string, arguments bool) (string, redact.Result) {
	if arguments {
		return redactArguments(r, s)
	}
	return r.String(s)
}

// redactArguments redacts a tool call's arguments: every string and member
// name inside when they are a JSON object or array, else the text as a
// whole.
func redactArguments(r *redact.Redactor, s string) (string, redact.Result) {
	t := bytes.TrimSpace([]byte(s))
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		var res redact.Result
		scan := func(_ sj.Path, v string) (string, bool) {
			o, rr := r.String(v)
			res.Add(rr)
			return o, o != v
		}
		out, changed, err := sj.RewriteNames([]byte(s), nil, scan, scan)
		if err == nil {
			if !changed {
				return s, res
			}
			return string(out), res
		}
	}
	return r.String(s)
}

// answerShape is what the gateway relies on in a chat completion or a
// stream chunk: decoded only after the strict reading passed, so
// encoding/json's lenient matching cannot see another document. A field of
// another type (an "index" that is a string, an "id" that is a number) is
// an answer of unknown shape, refused rather than passed on.
type answerShape struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   *int         `json:"index"`
		Message *answerDelta `json:"message"`
		Delta   *answerDelta `json:"delta"`
		// FinishReason is a string or null.
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *scope.Usage `json:"usage"`
}

type answerDelta struct {
	Role      string         `json:"role"`
	Content   jsontext.Value `json:"content"`
	ToolCalls []struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function *struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	Refusal          *string `json:"refusal"`
	ReasoningContent *string `json:"reasoning_content"`
}

// shapeError is an answer of a shape the gateway does not know.
type shapeError struct{ reason string }

func (e *shapeError) Error() string { return "unknown answer shape: " + e.reason }

// decodeShape decodes data (already read strictly) into answerShape and
// checks what the type system cannot: content is a string, null or a list
// of parts; stream chunks carry each choice's index.
func decodeShape(data []byte, stream bool) (*answerShape, error) {
	var sh answerShape
	if err := jsonv2.Unmarshal(data, &sh); err != nil {
		return nil, &shapeError{reason: err.Error()}
	}
	for i, c := range sh.Choices {
		d := c.Message
		if stream {
			d = c.Delta
			if c.Index == nil {
				return nil, &shapeError{reason: fmt.Sprintf("choices[%d] has no index", i)}
			}
		}
		if d == nil {
			continue
		}
		if k := firstByte(d.Content); k != 0 && k != '"' && k != 'n' && k != '[' {
			return nil, &shapeError{reason: fmt.Sprintf("choices[%d] content is neither text nor parts", i)}
		}
		for j, tc := range d.ToolCalls {
			if stream && tc.Index == nil {
				return nil, &shapeError{reason: fmt.Sprintf("choices[%d].tool_calls[%d] has no index", i, j)}
			}
		}
	}
	return &sh, nil
}

// textOf is a content value that is a JSON string, unquoted; ok is false
// for anything else (null, parts, absent). The value was read strictly.
func textOf(raw jsontext.Value) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	b, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return "", false
	}
	return string(b), true
}

func firstByte(raw []byte) byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

// checkAnswer reads a whole JSON answer strictly, checks its shape, and
// redacts every string but the structural ones (r nil: no redaction). A
// blocking detector withholds the choices it matched in (Azure OpenAI's
// content_filter convention); one that matched outside the choices
// withholds them all.
func checkAnswer(r *redact.Redactor, body []byte, chat bool) ([]byte, *answerShape, redact.Result, error) {
	blockedAt := map[int]bool{}
	outside := false
	out, res, err := redactDoc(r, body, answerFields, structuralAnswer, func(p sj.Path) {
		if len(p) >= 2 && p[0].Key == "choices" {
			blockedAt[p[1].Index] = true
		} else {
			outside = true
		}
	})
	if err != nil {
		return nil, nil, res, &shapeError{reason: err.Error()}
	}
	var sh *answerShape
	if chat {
		if sh, err = decodeShape(body, false); err != nil {
			return nil, nil, res, err
		}
	}
	if res.Blocked == "" {
		return out, sh, res, nil
	}
	if sh == nil {
		// Not a chat answer (embeddings): nothing to end with content_filter.
		return nil, nil, res, &shapeError{reason: "a blocked value outside a chat answer"}
	}
	return blockedCompletion(sh, blockedAt, outside), sh, res, nil
}

// blockedCompletion rebuilds an answer whose blocked choices carry no text
// and end with content_filter; nothing of the blocked value is kept.
func blockedCompletion(sh *answerShape, blockedAt map[int]bool, all bool) []byte {
	u := sh.Usage
	if u != nil && u.Unreadable != "" {
		u = nil // its counts, zeroed, would be false ones
	}
	doc := completion{ID: sh.ID, Object: "chat.completion", Created: sh.Created, Model: sh.Model, Usage: u, Choices: []completionChoice{}}
	for i, c := range sh.Choices {
		idx := i
		if c.Index != nil {
			idx = *c.Index
		}
		if all || blockedAt[i] {
			doc.Choices = append(doc.Choices, completionChoice{Index: idx, Message: completionMessage{Role: "assistant"}, FinishReason: "content_filter"})
			continue
		}
		// A choice without findings keeps its text, already redacted by
		// the walk; rebuilding from the shape keeps only role and content.
		content := ""
		if c.Message != nil {
			content, _ = textOf(c.Message.Content)
		}
		fr := "stop"
		if c.FinishReason != nil {
			fr = *c.FinishReason
		}
		doc.Choices = append(doc.Choices, completionChoice{Index: idx, Message: completionMessage{Role: "assistant", Content: content}, FinishReason: fr})
	}
	b, _ := json.Marshal(doc)
	return b
}

// streamKey names one text field of a streamed answer that arrives in
// fragments: a choice's content, refusal or reasoning, or one tool call's
// arguments. Each has its own redact.Stream, so a value split across
// chunks is still found.
type streamKey struct {
	choice int
	field  string
	tool   int
}

// chunkScanner checks and redacts a chat completion stream chunk by
// chunk. Text fields that arrive in fragments are redacted across chunk
// boundaries (each holds back a short tail that may start a value); every
// other string is redacted whole.
type chunkScanner struct {
	r       *redact.Redactor
	streams map[streamKey]*redact.Stream
	res     redact.Result
	// id, model and created of the last chunk, for the chunks it writes.
	id, model string
	created   int64
	// hideUsage: the gateway asked for the stream's usage on the client's
	// behalf, so the client gets the stream it would have had without
	// asking: no usage member (the null OpenAI then adds to every chunk,
	// or a usage beside the last choices). The usage is still read.
	hideUsage bool

	// fast reads the chunks of the common shape (from chunkReaders, on
	// the first chunk; release hands it back).
	fast *chunkReader
	// general sends every chunk the general way (the tests' oracle).
	general bool
}

// chunkReaders recycles the chunk readers (and their buffers) of finished
// streams.
var chunkReaders = sync.Pool{New: func() any { return new(chunkReader) }}

// release hands the scanner's reader back to the pool: no chunk is read
// after it, and no output of event is used any more.
func (s *chunkScanner) release() {
	if s.fast != nil {
		s.fast.reset()
		chunkReaders.Put(s.fast)
		s.fast = nil
	}
}

func newChunkScanner(r *redact.Redactor) *chunkScanner {
	return &chunkScanner{r: r, streams: map[streamKey]*redact.Stream{}}
}

// streamField returns the key of a fragment field at p, if it is one.
func streamField(sh *answerShape, p sj.Path) (streamKey, bool) {
	if len(p) < 4 || p[0].Key != "choices" || p[2].Key != "delta" {
		return streamKey{}, false
	}
	k := p[1].Index
	if k < 0 || k >= len(sh.Choices) || sh.Choices[k].Index == nil {
		return streamKey{}, false
	}
	idx := *sh.Choices[k].Index
	switch {
	case len(p) == 4:
		switch f := p[3].Key; f {
		case "content", "refusal", "reasoning_content", "reasoning":
			return streamKey{choice: idx, field: f, tool: -1}, true
		}
	case len(p) == 5 && p[3].Key == "function_call" && p[4].Key == "arguments":
		return streamKey{choice: idx, field: "function_call", tool: -1}, true
	case len(p) == 7 && p[3].Key == "tool_calls" && p[5].Key == "function" && p[6].Key == "arguments":
		j := p[4].Index
		d := sh.Choices[k].Delta
		if d == nil || j < 0 || j >= len(d.ToolCalls) {
			return streamKey{}, false
		}
		return streamKey{choice: idx, field: "arguments", tool: *d.ToolCalls[j].Index}, true
	}
	return streamKey{}, false
}

// chunkResult is what one stream event turned into.
type chunkResult struct {
	// out is what to send (zero or more SSE events); it may be the
	// scanner's own buffer, valid until the next event.
	out []byte
	// usage is the chunk's usage, if it had one; usageOnly when it had no
	// choices besides.
	usage     *scope.Usage
	usageOnly bool
	// blocked: out is the content_filter ending ([DONE] included) and the
	// stream must stop.
	blocked bool
	// notes, when noted, are out's release notes (otherwise they are read
	// from out).
	notes chunkNotes
	noted bool
}

// event checks and redacts one chunk's data. A chunk of the common shape
// is read once (chunkReader); any other goes the general way: the strict
// walk that redacts, after decoding into answerShape.
func (s *chunkScanner) event(data []byte) (chunkResult, error) {
	// A chunk written over several lines is framed again line by line
	// (sseEvent): the general way.
	if s.fast == nil {
		s.fast = chunkReaders.Get().(*chunkReader)
	}
	fast := !s.general && !bytes.ContainsAny(data, "\r\n") && s.fast.read(data)
	var sh *answerShape
	if fast {
		sh = &s.fast.sh
	} else {
		var err error
		if sh, err = decodeShape(data, true); err != nil {
			// Before the strict reading: refuse what encoding/json cannot
			// read, then let the strict reading say why when it can.
			if serr := sj.Check(data, answerFields); serr != nil {
				return chunkResult{}, &shapeError{reason: serr.Error()}
			}
			return chunkResult{}, err
		}
	}
	if sh.ID != "" {
		s.id, s.model, s.created = sh.ID, sh.Model, sh.Created
	}
	res := chunkResult{usage: sh.Usage, usageOnly: sh.Usage != nil && len(sh.Choices) == 0}
	var finishing choiceSet
	for _, c := range sh.Choices {
		if c.FinishReason != nil && *c.FinishReason != "" {
			finishing = append(finishing, *c.Index)
		}
	}
	// Text held back for a finishing choice goes out before its last chunk.
	pre, blocked, at := s.flushFinishing(finishing)
	if blocked {
		return chunkResult{out: s.blockedEnd(at), blocked: true}, nil
	}
	blockedChoice := -1
	visit, name := s.visits(sh, finishing, &blockedChoice)
	if fast {
		r := s.fast
		var cuts [][2]int
		if s.hideUsage {
			cuts = memberCuts(data, r.members, "usage", r.cuts[:0])
			r.cuts = cuts
		}
		out := append(append(r.out[:0], pre...), sseDataPrefix...)
		out, res.notes = r.rewrite(out, visit, cuts)
		r.out = append(out, '\n', '\n')
		// The held-back text before it (flushKey's chunks) is content.
		res.notes.content = res.notes.content || len(pre) > 0
		res.out, res.noted = r.out, true
	} else {
		out, _, err := sj.RewriteNames(data, answerFields, visit, name)
		if err != nil {
			return chunkResult{}, &shapeError{reason: err.Error()}
		}
		if s.hideUsage && blockedChoice < 0 {
			if out, err = withoutMember(out, "usage"); err != nil {
				return chunkResult{}, &shapeError{reason: err.Error()}
			}
		}
		res.out = append(pre, sseEvent(out)...)
	}
	if blockedChoice >= 0 {
		return chunkResult{out: s.blockedEnd(blockedChoice), blocked: true}, nil
	}
	return res, nil
}

// visits returns the visitors that redact the strings (visit) and the
// member names (name) of chunk sh: nil without a redactor. A fragment of
// a text that arrives over several chunks goes to its stream (all it held
// back when its choice finishes in sh); every other string and name is
// redacted whole. blockedChoice is set to the first choice a blocking
// detector matched in.
func (s *chunkScanner) visits(sh *answerShape, finishing choiceSet, blockedChoice *int) (visit, name sj.Visit) {
	if s.r == nil {
		return nil, nil
	}
	whole := func(p sj.Path, str string, arguments bool) (string, bool) {
		o, rr := redactText(s.r, str, arguments)
		s.res.Add(rr)
		if rr.Blocked != "" && *blockedChoice < 0 {
			*blockedChoice = 0
			if len(p) >= 2 && p[0].Key == "choices" && p[1].Index < len(sh.Choices) {
				*blockedChoice = *sh.Choices[p[1].Index].Index
			}
		}
		return o, o != str
	}
	name = func(p sj.Path, str string) (string, bool) { return whole(p, str, false) }
	visit = func(p sj.Path, str string) (string, bool) {
		if structuralAnswer(p, str) {
			return str, false
		}
		if k, ok := streamField(sh, p); ok {
			st := s.stream(k)
			text := st.Write(str)
			if finishing.has(k.choice) {
				text += st.Flush()
			}
			if st.Blocked() && *blockedChoice < 0 {
				*blockedChoice = k.choice
			}
			return text, text != str
		}
		return whole(p, str, isArguments(p))
	}
	return visit, name
}

// withoutMember returns the object data without its top-level members
// called name. They are cut out, not decoded and encoded again, so every
// other byte stays as it was checked: a member goes with the comma and
// whitespace before it, or, while no member is kept yet, with the comma
// after it. The whole object is read, so a duplicate name is an error.
func withoutMember(data []byte, name string) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("chunk is not an object: %w", err)
	}
	var members []memberSpan
	from := int(dec.InputOffset())
	for dec.PeekKind() == '"' {
		got, _, ok := nextMember(dec)
		if !ok {
			return nil, errors.New("chunk member unreadable")
		}
		members = append(members, memberSpan{name: got, start: from, end: int(dec.InputOffset())})
		from = int(dec.InputOffset())
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, fmt.Errorf("chunk unreadable: %w", err)
	}
	cuts := memberCuts(data, members, name, nil)
	if len(cuts) == 0 {
		return data, nil
	}
	out, _ := copyCut(make([]byte, 0, len(data)), data, 0, len(data), cuts)
	return out, nil
}

// memberCuts appends to cuts the byte ranges of data that withoutMember
// removes for the members called name, from the object's members in
// order: a member goes with the comma and whitespace before it, or, while
// no member is kept yet, with the comma after it.
func memberCuts(data []byte, members []memberSpan, name string, cuts [][2]int) [][2]int {
	if len(members) == 0 {
		return cuts
	}
	kept, from := false, members[0].start // just after '{'
	for _, m := range members {
		start, end := m.start, m.end
		if m.name != name {
			kept, from = true, end
			continue
		}
		if !kept {
			start = from
			if i := jsonlex.Space(data, end); i < len(data) && data[i] == ',' {
				end = i + 1
			}
		}
		cuts = append(cuts, [2]int{start, end})
		from = end
	}
	return cuts
}

// choiceSet is the indexes of the choices that finish in one chunk: one or
// a few, so a slice beats a map.
type choiceSet []int

func (c choiceSet) has(i int) bool {
	for _, v := range c {
		if v == i {
			return true
		}
	}
	return false
}

// flushFinishing returns chunks with the text held back for the choices
// that finish in this chunk; blocked (with the choice) when that text trips
// a blocking detector.
func (s *chunkScanner) flushFinishing(finishing choiceSet) (pre []byte, blocked bool, choice int) {
	if len(finishing) == 0 || len(s.streams) == 0 {
		return nil, false, 0
	}
	for _, k := range s.keys() {
		if !finishing.has(k.choice) {
			continue
		}
		out, blk := s.flushKey(k)
		if blk {
			return nil, true, k.choice
		}
		pre = append(pre, out...)
	}
	return pre, false, 0
}

func (s *chunkScanner) keys() []streamKey {
	keys := make([]streamKey, 0, len(s.streams))
	for k := range s.streams {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.choice != b.choice {
			return a.choice < b.choice
		}
		if a.tool != b.tool {
			return a.tool < b.tool
		}
		return a.field < b.field
	})
	return keys
}

func (s *chunkScanner) stream(k streamKey) *redact.Stream {
	st := s.streams[k]
	if st == nil {
		st = s.r.Stream()
		s.streams[k] = st
	}
	return st
}

// flushKey returns a chunk with the text held back for k, if any. It is
// written directly (the members in encoding/json's order for a map):
// several times a stream, the one writer of a chunk on the common path.
func (s *chunkScanner) flushKey(k streamKey) (out []byte, blocked bool) {
	st := s.streams[k]
	text := st.Flush()
	if st.Blocked() {
		return nil, true
	}
	if text == "" {
		return nil, false
	}
	b := append(make([]byte, 0, 160+len(text)), `data: {"choices":[{"delta":`...)
	switch k.field {
	case "arguments":
		b = append(b, `{"tool_calls":[{"function":{"arguments":`...)
		b, _ = jsontext.AppendQuote(b, text)
		b = append(b, `},"index":`...)
		b = strconv.AppendInt(b, int64(k.tool), 10)
		b = append(b, "}]}"...)
	case "function_call":
		b = append(b, `{"function_call":{"arguments":`...)
		b, _ = jsontext.AppendQuote(b, text)
		b = append(b, "}}"...)
	default:
		b = append(b, '{')
		b, _ = jsontext.AppendQuote(b, k.field)
		b = append(b, ':')
		b, _ = jsontext.AppendQuote(b, text)
		b = append(b, '}')
	}
	b = append(b, `,"finish_reason":null,"index":`...)
	b = strconv.AppendInt(b, int64(k.choice), 10)
	b = append(b, `}],"created":`...)
	b = strconv.AppendInt(b, s.created, 10)
	b = append(b, `,"id":`...)
	b, _ = jsontext.AppendQuote(b, s.id)
	b = append(b, `,"model":`...)
	b, _ = jsontext.AppendQuote(b, s.model)
	return append(b, `,"object":"chat.completion.chunk"}`+"\n\n"...), false
}

// flush returns chunks carrying all held-back text, to send before [DONE];
// blocked=true when held-back text trips a blocking detector, and out is
// then the content_filter ending, [DONE] included.
func (s *chunkScanner) flush() (out []byte, blocked bool) {
	for _, k := range s.keys() {
		b, blk := s.flushKey(k)
		if blk {
			return s.blockedEnd(k.choice), true
		}
		out = append(out, b...)
	}
	return out, false
}

// result is every count so far, the fragments' and the whole strings'.
func (s *chunkScanner) result() redact.Result {
	res := s.res
	for _, st := range s.streams {
		res.Add(st.Result())
	}
	return res
}

// blockedEnd ends the stream: the choice finishes with content_filter and
// [DONE] follows. Nothing of the blocked value was sent.
func (s *chunkScanner) blockedEnd(index int) []byte {
	b, _ := json.Marshal(map[string]any{"id": s.id, "object": "chat.completion.chunk", "created": s.created, "model": s.model,
		"choices": []any{map[string]any{"index": index, "delta": map[string]any{}, "finish_reason": "content_filter"}}})
	return append(sseEvent(b), "data: [DONE]\n\n"...)
}
