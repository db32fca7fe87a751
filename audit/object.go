package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/gowebpki/jcs"
)

// Object is the one form of an entry's summary, built member by member
// straight into its canonical JSON (RFC 8785): no map to build, walk and
// sort by reflection on every request. The bytes are those the map
// summaries the trail was first written with have for the same members
// (canonicalSummary); TestObjectMatchesMap and TestObjectAnyMatchesMap
// hold the two to it, so old and new entries hash alike. Nested objects are opened with Begin and closed with End,
// in the same buffers. A later member of the same name replaces the
// earlier one. The zero value is an empty object; an Object is for one
// goroutine.
//
// An Object handed to a Log in a Record is spent once the Log has encoded
// it: its storage goes back to a pool for the next summary (a summary of
// fifty members would otherwise allocate some 4 KB per entry), and a spent
// Object is empty and refuses to be written again (Bytes returns
// errSpent) rather than write an empty summary.
type Object struct {
	buf   []byte // the members' values, one after another
	mems  []member
	open  []int // the members opened by Begin and not yet ended
	err   error
	store *objectStore // where buf, mems and open came from; nil before the first member
}

// objectStore is the storage of one Object, reused across summaries.
type objectStore struct {
	buf  []byte
	mems []member
	open []int
}

// objectStores holds the storage of spent Objects (spend).
var objectStores = sync.Pool{New: func() any {
	return &objectStore{buf: make([]byte, 0, 1024), mems: make([]member, 0, 64), open: make([]int, 0, 4)}
}}

// maxPooledObject bounds the storage kept: a rare large summary's is
// dropped.
const maxPooledObject = 16 << 10

// errSpent is Bytes' error for an Object a Log has already written.
var errSpent = errors.New("summary: already written to the trail (an Object is for one entry)")

type member struct {
	key        string
	parent     int // index+1 of the enclosing member; 0: the top level
	start, end int // a value's bytes in buf; for an object, its members' indexes
	object     bool
}

// at returns where the next value starts, with room for a whole entry's
// members (a spent Object's storage) taken at the first.
func (o *Object) at() int {
	if o.store == nil {
		st := objectStores.Get().(*objectStore)
		o.store, o.buf, o.mems, o.open = st, st.buf[:0], st.mems[:0], st.open[:0]
	}
	return len(o.buf)
}

// spend empties o once a Log has encoded it and gives its storage back
// for the next summary. Using o again is an error (errSpent).
func (o *Object) spend() {
	st, buf, mems, open := o.store, o.buf, o.mems, o.open
	*o = Object{err: errSpent}
	if st == nil || cap(buf)+cap(mems)*int(unsafe.Sizeof(member{})) > maxPooledObject {
		return
	}
	clear(mems) // drop the keys
	st.buf, st.mems, st.open = buf[:0], mems[:0], open[:0]
	objectStores.Put(st)
}

func (o *Object) add(key string, start int) {
	o.mems = append(o.mems, member{key: key, parent: o.parent(), start: start, end: len(o.buf)})
}

func (o *Object) parent() int {
	if len(o.open) == 0 {
		return 0
	}
	return o.open[len(o.open)-1] + 1
}

// Begin opens a nested object as member key; the members added until the
// matching End are its own.
func (o *Object) Begin(key string) {
	o.add(key, o.at())
	i := len(o.mems) - 1
	o.mems[i].object = true
	o.open = append(o.open, i)
}

// End closes the object the last Begin opened.
func (o *Object) End() {
	if len(o.open) == 0 {
		o.fail(errors.New("summary: End without Begin"))
		return
	}
	i := o.open[len(o.open)-1]
	o.open = o.open[:len(o.open)-1]
	o.mems[i].start, o.mems[i].end = i+1, len(o.mems)
}

// Str adds a string member. Invalid UTF-8 is written as encoding/json
// writes it: each bad byte becomes U+FFFD.
func (o *Object) Str(key, v string) {
	start := o.at()
	if !utf8.ValidString(v) {
		v = replaceInvalid(v)
	}
	o.buf = appendEscaped(o.buf, v)
	o.add(key, start)
}

// Int adds an integer member; one beyond ±(2^53-1) is written as a string
// of its decimal digits, never rounded to a double (appendInt).
func (o *Object) Int(key string, v int64) {
	start := o.at()
	o.buf = appendInt(o.buf, v)
	o.add(key, start)
}

// Num adds a number member. NaN and infinities have no JSON form: the
// entry is refused (Bytes returns the error).
func (o *Object) Num(key string, v float64) {
	start := o.at()
	o.buf = o.number(v)
	o.add(key, start)
}

func (o *Object) number(v float64) []byte {
	s, err := jcs.NumberToJSON(v)
	if err != nil {
		o.fail(fmt.Errorf("summary number: %w", err))
		return append(o.buf, '0')
	}
	return append(o.buf, s...)
}

// Bool adds a boolean member.
func (o *Object) Bool(key string, v bool) {
	start := o.at()
	o.buf = strconv.AppendBool(o.buf, v)
	o.add(key, start)
}

// Strs adds an array of strings (null when v is nil, as encoding/json).
func (o *Object) Strs(key string, v []string) {
	start := o.at()
	if v == nil {
		o.buf = append(o.buf, "null"...)
	} else {
		o.buf = append(o.buf, '[')
		for i, s := range v {
			if i > 0 {
				o.buf = append(o.buf, ',')
			}
			if !utf8.ValidString(s) {
				s = replaceInvalid(s)
			}
			o.buf = appendEscaped(o.buf, s)
		}
		o.buf = append(o.buf, ']')
	}
	o.add(key, start)
}

// Any adds a member of any value encoding/json can write (maps, slices,
// structs…), encoded once by the rules a whole map summary had: integers
// beyond ±(2^53-1) as strings, invalid UTF-8 as encoding/json writes it,
// RFC 8785 member order. A value with no JSON form refuses the entry
// (Bytes returns the error).
func (o *Object) Any(key string, v any) {
	start := o.at()
	if b, ok := appendCanonical(o.buf, v, 1); ok {
		o.buf = b
	} else {
		o.buf = append(o.buf[:start], o.general(v)...)
	}
	o.add(key, start)
}

// Members returns an object of the given name, value pairs, each value
// added with Any: the short form for a summary written as one literal. A
// name that is not a string, or a name without a value, refuses the entry.
func Members(kv ...any) *Object {
	o := &Object{}
	if len(kv)%2 != 0 {
		o.fail(errors.New("summary: a name without a value"))
		return o
	}
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			o.fail(fmt.Errorf("summary: member name %v is not a string", kv[i]))
			return o
		}
		o.Any(k, kv[i+1])
	}
	return o
}

// general encodes v by the map path's general rule, as the one member of a
// summary, and cuts the member's value out: one rule for both paths.
func (o *Object) general(v any) []byte {
	b, err := canonicalSummary(map[string]any{"v": v})
	if err != nil {
		o.fail(err)
		return []byte("null")
	}
	return b[len(`{"v":`) : len(b)-1]
}

// Raw returns the canonical JSON of the top-level member key (the last of
// that name), for readers that act on what a summary holds.
func (o *Object) Raw(key string) (json.RawMessage, bool) {
	if o == nil {
		return nil, false
	}
	for i := len(o.mems) - 1; i >= 0; i-- {
		m := o.mems[i]
		if m.parent != 0 || m.key != key {
			continue
		}
		if m.object {
			return o.emit(nil, m.start, m.end, i+1), true
		}
		return append(json.RawMessage(nil), o.buf[m.start:m.end]...), true
	}
	return nil, false
}

// Text returns the top-level member key when it is a string, else "".
func (o *Object) Text(key string) string {
	raw, ok := o.Raw(key)
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// RawMember adds a member whose value is already canonical JSON, as Raw
// returns it (to carry a member from one summary into another).
func (o *Object) RawMember(key string, raw json.RawMessage) {
	start := o.at()
	o.buf = append(o.buf, raw...)
	o.add(key, start)
}

func (o *Object) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// Bytes returns the canonical JSON of the object: members sorted by their
// names' UTF-16 code units (RFC 8785 3.2.3), the last of a repeated name
// kept.
func (o *Object) Bytes() ([]byte, error) {
	if o == nil {
		return []byte("{}"), nil
	}
	if o.err != nil {
		return nil, o.err
	}
	if len(o.open) > 0 {
		return nil, errors.New("summary: Begin without End")
	}
	return o.emit(make([]byte, 0, len(o.buf)+24*len(o.mems)+2), 0, len(o.mems), 0), nil
}

// emit writes the members of indexes [lo, hi) whose parent is parent, as
// one object.
func (o *Object) emit(out []byte, lo, hi, parent int) []byte {
	var stack [24]int
	kids := stack[:0]
	for i := lo; i < hi; i++ {
		if o.mems[i].parent == parent {
			kids = append(kids, i)
		}
	}
	// Stable, so that of two members with one name the later stays later.
	slices.SortStableFunc(kids, func(a, b int) int { return compareUTF16(o.mems[a].key, o.mems[b].key) })
	out = append(out, '{')
	first := true
	for n, i := range kids {
		m := o.mems[i]
		if n+1 < len(kids) && o.mems[kids[n+1]].key == m.key {
			continue // replaced by a later member of this name
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		k := m.key
		if !utf8.ValidString(k) {
			k = replaceInvalid(k)
		}
		out = appendEscaped(out, k)
		out = append(out, ':')
		if m.object {
			out = o.emit(out, m.start, m.end, i+1)
		} else {
			out = append(out, o.buf[m.start:m.end]...)
		}
	}
	return append(out, '}')
}

// Map decodes the object back into a map (numbers as float64), for
// readers such as tests.
func (o *Object) Map() map[string]any {
	b, err := o.Bytes()
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// replaceInvalid replaces each byte of s that is not part of valid UTF-8
// with U+FFFD, as encoding/json does.
func replaceInvalid(s string) string {
	out := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, s[i:i+n]...)
		}
		i += n
	}
	return string(out)
}
