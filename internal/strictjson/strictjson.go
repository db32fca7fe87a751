// Package strictjson reads untrusted JSON once, strictly, so that the
// gateway acts on exactly what every other reader of the same bytes will
// see: valid UTF-8 only, no duplicate member names at any depth, nothing
// after the value, and, where the caller knows the shape, no member name
// that differs from a known one only by case (encoding/json would read
// "Model" as "model"; a case-sensitive provider would not).
//
// Rewrite walks the same way and lets the caller replace string values
// (redaction), and RewriteNames member names too; the output is re-encoded
// from what was checked, never the original bytes patched by a second
// parser.
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// Fields describes the known member names of an object (and, through
// Elem, of the elements of an array) at one position of a document.
// A nil *Fields is a position whose shape is not known: only duplicates are
// checked below it.
type Fields struct {
	names  map[string]*Fields
	folded map[string]string
	// canon maps each known name to itself: a member name read from a
	// document becomes the known string without a copy.
	canon map[string]string
	elem  *Fields
}

// Object describes an object whose known members are the keys of m, each
// with the description of its value (nil: unknown shape).
func Object(m map[string]*Fields) *Fields {
	f := &Fields{names: m, folded: make(map[string]string, len(m)), canon: make(map[string]string, len(m))}
	for k := range m {
		f.folded[strings.ToLower(k)] = k
		f.canon[k] = k
	}
	return f
}

// Array describes an array whose elements are described by elem.
func Array(elem *Fields) *Fields { return &Fields{elem: elem} }

// Either describes a value that may be an object (o) or an array (of a's
// elements), such as a chat message's content (a string or a list of parts).
func Either(o, a *Fields) *Fields {
	f := &Fields{}
	if o != nil {
		f.names, f.folded, f.canon = o.names, o.folded, o.canon
	}
	if a != nil {
		f.elem = a.elem
	}
	return f
}

// Names lists the known member names (tests and error messages).
func (f *Fields) Names() []string {
	if f == nil {
		return nil
	}
	return slices.Collect(maps.Keys(f.names))
}

func (f *Fields) member(name string) *Fields {
	if f == nil || f.names == nil {
		return nil
	}
	return f.names[name]
}

// intern returns name as a string: the known one when f knows it.
func (f *Fields) intern(name []byte) string {
	if f != nil {
		if s, ok := f.canon[string(name)]; ok {
			return s
		}
	}
	return string(name)
}

// knows reports whether name is one of f's known members (the gateway's own
// vocabulary, which carries nothing of the caller's).
func (f *Fields) knows(name string) bool {
	if f == nil || f.names == nil {
		return false
	}
	_, ok := f.names[name]
	return ok
}

// shadows reports whether name is a known member or differs from one only
// by case: a name a rewrite may not produce.
func (f *Fields) shadows(name string) bool {
	if f == nil || f.names == nil {
		return false
	}
	_, ok := f.folded[strings.ToLower(name)]
	return ok
}

func (f *Fields) element() *Fields {
	if f == nil {
		return nil
	}
	return f.elem
}

// Elem is one step of a Path: a member name, or an array index when Key
// is empty and Index >= 0.
type Elem struct {
	Key   string
	Index int
}

// Path is where a value sits in the document, outermost first.
type Path []Elem

// String renders the path as messages[0].content.
func (p Path) String() string {
	var b strings.Builder
	for _, e := range p {
		if e.Index >= 0 && e.Key == "" {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.Index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.Key)
	}
	return b.String()
}

// Key returns the member name n steps from the end (0: the last step), or
// "" when that step is an array index or out of range.
func (p Path) Key(n int) string {
	i := len(p) - 1 - n
	if i < 0 || i >= len(p) {
		return ""
	}
	return p[i].Key
}

// Error is a document the strict reading refused; Path names where.
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Visit is called for every string value (not member names) with its
// path; it returns the replacement and whether the value changed.
type Visit func(p Path, s string) (string, bool)

// Check reads data strictly against f (nil: shape unknown).
func Check(data []byte, f *Fields) error {
	_, _, err := Rewrite(data, f, nil)
	return err
}

// Sink receives the document as the strict reading walks it, in document
// order, for a caller that builds its own representation of it in the
// same pass instead of parsing the bytes again (the chat policy's input).
// What it was given is worth nothing when the reading fails.
type Sink interface {
	// Begin opens an object (obj) or an array.
	Begin(obj bool)
	// Name is the name of the object member whose value comes next.
	Name(name string)
	// Scalar is a string, number, true, false or null as written (a
	// string quoted); raw is valid only during the call.
	Scalar(raw jsontext.Value)
	// End closes the innermost object or array.
	End()
}

// CheckInto is Check that also hands the document to s as it reads it.
func CheckInto(data []byte, f *Fields, s Sink) error {
	_, err := walkInto(data, f, nil, nil, s)
	return err
}

// Rewrite reads data strictly against f, calls v for every string value,
// and, when v changed any, returns the checked bytes with those values
// replaced (quoted anew); otherwise data itself and changed=false.
func Rewrite(data []byte, f *Fields, v Visit) (out []byte, changed bool, err error) {
	return RewriteNames(data, f, v, nil)
}

// RewriteNames is Rewrite that also calls name for every member name that
// is not a known member of its object's Fields (below a position of
// unknown shape: every name). Its path is the member's, ending with the
// name as written; the walk and the paths of what follows keep using that
// original name, so structural decisions see what was checked. A replaced
// name that equals a sibling's, or another replaced one, or that matches a
// known member up to case, gets the first free suffix "#2", "#3", ...: the
// output has no repeated name and nothing a case-insensitive reader would
// take for a known field.
func RewriteNames(data []byte, f *Fields, v, name Visit) (out []byte, changed bool, err error) {
	repl, err := walk(data, f, v, name)
	if err != nil || len(repl) == 0 {
		return data, false, err
	}
	return splice(data, repl), true, nil
}

// span is a string value of the checked document (its quotes included) and
// what replaces it.
type span struct {
	start, end int64
	with       string
}

// splice writes data with the spans replaced by their new values, quoted.
// Everything else is the checked bytes as they were.
func splice(data []byte, repl []span) []byte {
	out := make([]byte, 0, len(data)+64)
	var at int64
	for _, r := range repl {
		out = append(out, data[at:r.start]...)
		out, _ = jsontext.AppendQuote(out, r.with)
		at = r.end
	}
	return append(out, data[at:]...)
}

// walk is the one strict reading. It returns the replacements v asked for,
// in document order. Scalars and member names are read as raw values (no
// copy); only strings v is called for are unquoted. The walker and its
// buffers are pooled: a chunk of a stream is read without allocating
// beyond the strings handed to v.
func walk(data []byte, top *Fields, v, name Visit) ([]span, error) {
	return walkInto(data, top, v, name, nil)
}

// walkInto is walk that also hands the document to sink (nil: none).
func walkInto(data []byte, top *Fields, v, name Visit, sink Sink) ([]span, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &Error{Msg: "the body is empty"}
	}
	w := walkers.Get().(*walker)
	defer w.release()
	w.data, w.sink = data, sink
	w.reader.Reset(data)
	w.dec.Reset(&w.reader)
	return w.run(top, v, name)
}

// frame is one open object or array.
type frame struct {
	f     *Fields
	obj   bool
	index int
	start int64 // offset of its '{' or '['
}

// renamed is a member name the name visitor replaced: the original, what
// replaces it, and the index of its span.
type renamed struct {
	depth      int // len(stack) while its object is open
	name, with string
	span       int
}

// walker holds the state of one walk; pooled.
type walker struct {
	dec     jsontext.Decoder
	reader  bytes.Reader
	stack   []frame
	path    Path
	scratch []byte
	// name is the member name whose value comes next.
	name    string
	hasName bool
	// renames are the replaced names of the open objects, innermost last.
	renames []renamed
	// data is the document, for reading an object's names again.
	data []byte
	// sink, if set, is handed the document as it is read.
	sink Sink
}

var walkers = sync.Pool{New: func() any { return new(walker) }}

func (w *walker) release() {
	w.stack, w.path, w.scratch, w.renames = w.stack[:0], w.path[:0], w.scratch[:0], w.renames[:0]
	w.name, w.hasName, w.data, w.sink = "", false, nil, nil
	w.reader.Reset(nil)
	w.dec.Reset(&w.reader)
	walkers.Put(w)
}

// enter returns the description of the value about to be read and pushes
// its path step.
func (w *walker) enter(top *Fields) *Fields {
	if len(w.stack) == 0 {
		return top
	}
	fr := &w.stack[len(w.stack)-1]
	if fr.obj {
		w.path = append(w.path, Elem{Key: w.name, Index: -1})
		w.hasName = false
		return fr.f.member(w.name)
	}
	w.path = append(w.path, Elem{Index: fr.index})
	fr.index++
	return fr.f.element()
}

func (w *walker) leave() {
	if len(w.stack) > 0 && len(w.path) > 0 {
		w.path = w.path[:len(w.path)-1]
	}
}

func (w *walker) run(top *Fields, v, name Visit) ([]span, error) {
	dec := &w.dec
	var repl []span
	for {
		k := dec.PeekKind()
		switch k {
		case '{', '[', '}', ']':
			if _, err := dec.ReadToken(); err != nil {
				return nil, syntaxError(err, w.path)
			}
		case 0:
			_, err := dec.ReadToken()
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return nil, syntaxError(err, w.path)
		}
		inObj := len(w.stack) > 0 && w.stack[len(w.stack)-1].obj
		switch k {
		case '{', '[':
			f := w.enter(top)
			w.stack = append(w.stack, frame{f: f, obj: k == '{', start: dec.InputOffset() - 1})
			if w.sink != nil {
				w.sink.Begin(k == '{')
			}
			continue
		case '}', ']':
			if err := w.closeValue(repl); err != nil {
				return nil, err
			}
		default:
			raw, err := dec.ReadValue()
			if err != nil {
				return nil, syntaxError(err, w.path)
			}
			if k == '"' {
				w.scratch = unquote(w.scratch[:0], raw)
				isName := inObj && !w.hasName
				var sp span
				var replaced bool
				if isName {
					f := w.stack[len(w.stack)-1].f
					if err := checkName(f, w.scratch, w.path); err != nil {
						return nil, err
					}
					w.name, w.hasName = f.intern(w.scratch), true
					if w.sink != nil {
						w.sink.Name(w.name)
					}
					if name != nil && !f.knows(w.name) {
						sp, replaced = w.rename(name, int64(len(raw)), len(repl))
					}
				} else {
					w.enter(top)
					if w.sink != nil {
						w.sink.Scalar(raw)
					}
					if v != nil {
						s := string(w.scratch)
						if r, ok := v(w.path, s); ok && r != s {
							end := dec.InputOffset()
							sp, replaced = span{start: end - int64(len(raw)), end: end, with: r}, true
						}
					}
					w.leave()
				}
				// One append of repl: with one, the compiler starts its
				// backing store on the stack.
				if replaced {
					repl = append(repl, sp)
				}
				if isName {
					continue
				}
				break
			}
			if err := w.scalar(top, k == '0', raw); err != nil {
				return nil, err
			}
		}
		if len(w.stack) == 0 {
			break
		}
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, &Error{Msg: "there is data after the JSON value"}
	}
	return repl, nil
}

// closeValue ends the object or array just closed: the member names it
// held that a rename changed are checked unique (their spans in repl get
// the final names), and the sink is told.
func (w *walker) closeValue(repl []span) error {
	if n := len(w.renames); n > 0 && w.renames[n-1].depth == len(w.stack) {
		mine, err := w.uniqueNames(w.dec.InputOffset())
		if err != nil {
			return err
		}
		for _, r := range mine {
			repl[r.span].with = r.with
		}
	}
	w.stack = w.stack[:len(w.stack)-1]
	w.leave()
	if w.sink != nil {
		w.sink.End()
	}
	return nil
}

// scalar reads a value that is neither a string nor a container (a number,
// true, false, null) at the current path.
func (w *walker) scalar(top *Fields, number bool, raw []byte) error {
	w.enter(top)
	if number {
		// A number no reader can hold as a float64 (1e400) reads as
		// infinity, an error or a rounded value depending on the reader:
		// refused, like any value of unknown meaning.
		if _, err := strconv.ParseFloat(string(raw), 64); err != nil {
			return &Error{Path: w.path.String(), Msg: "a number out of range"}
		}
	}
	if w.sink != nil {
		w.sink.Scalar(raw)
	}
	w.leave()
	return nil
}

// rename hands the member name just read (n bytes as written) to name; a
// replacement is returned as the span to add (its index will be at) and
// remembered for uniqueNames.
func (w *walker) rename(name Visit, n int64, at int) (span, bool) {
	p := append(w.path, Elem{Key: w.name, Index: -1})
	r, ok := name(p, w.name)
	if !ok || r == w.name {
		return span{}, false
	}
	w.renames = append(w.renames, renamed{depth: len(w.stack), name: w.name, with: r, span: at})
	end := w.dec.InputOffset()
	return span{start: end - n, end: end, with: r}, true
}

// uniqueNames resolves the replaced names of the object that has just
// closed (ending at end in the input), and returns them: each that equals a
// name the object keeps, an earlier replacement, or a known member up to
// case gets the first free "#n". The rare path: the object's names are
// read again.
func (w *walker) uniqueNames(end int64) ([]renamed, error) {
	fr := w.stack[len(w.stack)-1]
	first := len(w.renames)
	for first > 0 && w.renames[first-1].depth == len(w.stack) {
		first--
	}
	mine := w.renames[first:]
	w.renames = w.renames[:first]
	names, err := objectNames(w.data[fr.start:end])
	if err != nil {
		return nil, err
	}
	gone := make(map[string]bool, len(mine))
	for _, r := range mine {
		gone[r.name] = true
	}
	taken := make(map[string]bool, len(names))
	for _, n := range names {
		if !gone[n] {
			taken[n] = true
		}
	}
	for k := range mine {
		with := mine[k].with
		for i := 2; taken[with] || fr.f.shadows(with); i++ {
			with = mine[k].with + "#" + strconv.Itoa(i)
		}
		mine[k].with = with
		taken[with] = true
	}
	return mine, nil
}

// objectNames reads the member names of obj, an object already checked.
func objectNames(obj []byte) ([]string, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.ReadToken(); err != nil {
		return nil, fmt.Errorf("strictjson: reading an object again: %w", err)
	}
	var names []string
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, fmt.Errorf("strictjson: reading an object again: %w", err)
		}
		names = append(names, tok.String())
		if err := dec.SkipValue(); err != nil {
			return nil, fmt.Errorf("strictjson: reading an object again: %w", err)
		}
	}
	return names, nil
}

// unquote appends the value of the JSON string raw to dst.
func unquote(dst, raw []byte) []byte {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return append(dst, inner...)
	}
	out, err := jsontext.AppendUnquote(dst, raw)
	if err != nil {
		// The decoder validated the string: this cannot fail.
		return append(dst, inner...)
	}
	return out
}

// checkName refuses a member name that differs from a known one only by
// case; name is only valid during the call.
func checkName(f *Fields, name []byte, path Path) error {
	if f == nil || f.names == nil {
		return nil
	}
	if _, known := f.names[string(name)]; known {
		return nil
	}
	if canon, ok := f.folded[strings.ToLower(string(name))]; ok {
		return &Error{Path: append(path, Elem{Key: string(name), Index: -1}).String(),
			Msg: fmt.Sprintf("the key %q differs from the field %q only by case", name, canon)}
	}
	return nil
}

func syntaxError(err error, p Path) error {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		where := p.String()
		if ptr := string(se.JSONPointer); ptr != "" {
			where = PointerPath(ptr)
		}
		if errors.Is(se.Err, jsontext.ErrDuplicateName) {
			return &Error{Path: where, Msg: "duplicate key"}
		}
		return &Error{Path: where, Msg: fmt.Sprintf("invalid JSON at byte %d: %v", se.ByteOffset, se.Err)}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Path: p.String(), Msg: "the JSON ends too early"}
	}
	return &Error{Path: p.String(), Msg: err.Error()}
}

// PointerPath turns a JSON Pointer (/messages/0/content) into the path
// notation of Path.String (messages[0].content).
func PointerPath(ptr string) string {
	var b strings.Builder
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		if n, err := strconv.Atoi(tok); err == nil && n >= 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// FromStruct describes the JSON shape of a struct type from its json tags:
// each tagged field is a known member, nested structs (also in slices,
// arrays and pointers) are described in turn; maps and interfaces are of
// unknown shape.
func FromStruct(t reflect.Type) *Fields {
	return fromType(t, map[reflect.Type]*Fields{})
}

func fromType(t reflect.Type, seen map[reflect.Type]*Fields) *Fields {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		return Array(fromType(t.Elem(), seen))
	case reflect.Struct:
	default:
		return nil
	}
	if f, ok := seen[t]; ok {
		return f
	}
	m := map[string]*Fields{}
	f := Object(m)
	seen[t] = f
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		m[name] = fromType(sf.Type, seen)
		f.folded[strings.ToLower(name)] = name
	}
	return f
}
