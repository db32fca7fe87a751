package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// tsLayout is RFC 3339 in UTC with all nine fraction digits. The fixed width
// keeps timestamps sortable as text, and it is still plain RFC 3339.
const tsLayout = "2006-01-02T15:04:05.000000000Z"

// hashSuffix is what the writer appends to the canonical body (minus its
// closing brace) to form a line: `,"hash":"<64 hex>"}`.
const (
	hashKey       = `,"hash":"`
	hashSuffixLen = len(hashKey) + 64 + len(`"}`)
)

// entryFields is the exact field set of an entry line, sorted. A line with
// any other field, or without one of these, is malformed.
var entryFields = []string{
	"agent_id", "chain", "hash", "kind", "payload_sha256", "prev_hash",
	"request_id", "seq", "session_id", "summary", "ts",
}

// prepared is a record encoded in the caller's goroutine, so the single
// writer goroutine only splices in prev_hash, seq and ts and hashes the
// result. buf holds three pieces of the canonical body, in RFC 8785 key
// order (agent_id, chain, kind, payload_sha256, prev_hash, request_id, seq,
// session_id, summary, ts):
//
//	buf[:mid]     {"agent_id":…,"chain":…,"kind":…,"payload_sha256":…,"prev_hash":"
//	buf[mid:tail] ","request_id":…,"seq":
//	buf[tail:]    ,"session_id":…,"summary":{…},"ts":"
type prepared struct {
	rec       Record
	summary   json.RawMessage
	buf       []byte
	box       *[]byte // buf's holder in bodies, for release
	mid, tail int
}

// prepare encodes r for chain (already a canonical JSON string).
func prepare(chain []byte, r Record) (*prepared, error) {
	p := new(prepared)
	if err := p.fill(chain, r); err != nil {
		return nil, err
	}
	return p, nil
}

// bodies are the buffers of prepared bodies: the writer gives each back
// once it has copied the body into its line (release), so an append does
// not allocate one.
var bodies = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBody bounds the buffers kept: a rare large entry's is dropped.
const maxPooledBody = 4 << 10

// fill encodes r for chain into p.
func (p *prepared) fill(chain []byte, r Record) error {
	if r.Kind == "" {
		return errors.New("audit record: kind is required")
	}
	if r.PayloadSHA256 != "" && !isHex64(r.PayloadSHA256) {
		return fmt.Errorf("audit record: payload_sha256 %q is not 64 lowercase hex digits", r.PayloadSHA256)
	}
	summary := []byte("{}")
	if r.Object != nil {
		var err error
		if summary, err = r.Object.Bytes(); err != nil {
			return fmt.Errorf("audit record: %w", err)
		}
	}
	spent := r.Object
	size := 160 + len(chain) + len(summary) + len(r.Kind) + len(r.AgentID) + len(r.SessionID) + len(r.RequestID) + len(r.PayloadSHA256)
	if size+hashSuffixLen > MaxEntryBytes {
		return fmt.Errorf("%w: about %d bytes, limit %d", ErrTooLarge, size, MaxEntryBytes)
	}
	box := bodies.Get().(*[]byte)
	b := (*box)[:0]
	if cap(b) < size {
		b = make([]byte, 0, size)
	}
	b = append(b, `{"agent_id":`...)
	b = appendCanonicalString(b, r.AgentID)
	b = append(b, `,"chain":`...)
	b = append(b, chain...)
	b = append(b, `,"kind":`...)
	b = appendCanonicalString(b, r.Kind)
	b = append(b, `,"payload_sha256":`...)
	b = appendCanonicalString(b, r.PayloadSHA256)
	b = append(b, `,"prev_hash":"`...)
	mid := len(b)
	b = append(b, `","request_id":`...)
	b = appendCanonicalString(b, r.RequestID)
	b = append(b, `,"seq":`...)
	tail := len(b)
	b = append(b, `,"session_id":`...)
	b = appendCanonicalString(b, r.SessionID)
	b = append(b, `,"summary":`...)
	b = append(b, summary...)
	b = append(b, `,"ts":"`...)
	r.Object = nil // the canonical bytes are kept; drop the caller's
	if spent != nil {
		spent.spend()
	}
	*box = b
	*p = prepared{rec: r, summary: summary, buf: b, box: box, mid: mid, tail: tail}
	return nil
}

// release gives the body's buffer back once no line will be made from it
// again.
func (p *prepared) release() {
	if box := p.box; box != nil && cap(*box) <= maxPooledBody {
		bodies.Put(box)
	}
	p.buf, p.box = nil, nil
}

// appendLine appends the entry's line (with its trailing newline) to dst and
// returns the new slice and the entry's hash. The hash covers the canonical
// body; the line is that body with `,"hash":"…"` inserted before its closing
// brace, which is why a gateway-written line can be checked with sed and
// sha256sum (docs/compliance.md).
func (p *prepared) appendLine(dst []byte, seq int64, prevHash string, ts time.Time) ([]byte, string) {
	start := len(dst)
	dst = append(dst, p.buf[:p.mid]...)
	dst = append(dst, prevHash...)
	dst = append(dst, p.buf[p.mid:p.tail]...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, p.buf[p.tail:]...)
	dst = ts.UTC().AppendFormat(dst, tsLayout)
	dst = append(dst, `"}`...)
	sum := sha256.Sum256(dst[start:])
	var hexSum [64]byte
	hex.Encode(hexSum[:], sum[:])
	dst = dst[:len(dst)-1] // reopen the object for the hash member
	dst = append(dst, hashKey...)
	dst = append(dst, hexSum[:]...)
	dst = append(dst, "\"}\n"...)
	return dst, string(hexSum[:])
}

// entry returns the Entry appendLine wrote.
func (p *prepared) entry(chain string, seq int64, prevHash, hash string, ts time.Time) Entry {
	return Entry{
		Seq: seq, TS: ts.UTC(), Chain: chain, Kind: p.rec.Kind,
		AgentID: p.rec.AgentID, SessionID: p.rec.SessionID, RequestID: p.rec.RequestID,
		PayloadSHA256: p.rec.PayloadSHA256, Summary: p.summary, PrevHash: prevHash, Hash: hash,
	}
}

// appendCanonicalString appends s as an RFC 8785 string: only '"', '\\' and
// control characters are escaped (the five short escapes where JSON has
// them, \u00xx otherwise), everything else is raw UTF-8. Invalid UTF-8 is
// replaced with U+FFFD, as encoding/json does, because RFC 8785 cannot
// represent it. TestCanonicalStringMatchesJCS holds this to jcs.Transform.
func appendCanonicalString(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return appendEscaped(dst, s)
}

// appendEscaped is appendCanonicalString for a string known to be valid
// UTF-8.
func appendEscaped(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c >= 0x20:
			dst = append(dst, c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		default:
			const hexDigits = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return append(dst, '"')
}

// errHashMismatch marks a line whose recorded hash is not the hash of its
// content; Verify reports it as "hash mismatch".
var errHashMismatch = errors.New("hash mismatch")

// errNotCanonical marks a line whose hash holds but whose bytes are not
// the canonical form the hash covers. The hash is taken over the RFC 8785
// form, which writes every number as its nearest double: without this
// check a number could be re-spelled (9007199254740993 for
// 9007199254740992, 0.10000000000000000001 for 0.1) and still verify, and
// a reader of the line would see a value the trail never recorded.
var errNotCanonical = errors.New("entry is not in canonical form")

// canonicalFields is a line of the trail (an entry, a checkpoint) in its
// RFC 8785 form, and its members, every one of required among them.
func canonicalFields(line []byte, required []string) ([]byte, map[string]json.RawMessage, error) {
	canon, err := jcs.Transform(line)
	if err != nil {
		return nil, nil, fmt.Errorf("not canonicalizable JSON: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(canon, &fields); err != nil {
		return nil, nil, errors.New("not a JSON object")
	}
	for _, k := range required {
		if _, ok := fields[k]; !ok {
			return nil, nil, fmt.Errorf("missing field %q", k)
		}
	}
	return canon, fields, nil
}

// parseEntry parses one line (without its newline) strictly, as Verify and
// an independent verifier would: the line must be I-JSON without duplicate
// keys, carry exactly the entry fields with the right types, its hash
// must be the SHA-256 of the RFC 8785 form of the line without "hash", and
// the line must be that form with the hash inserted, byte for byte.
func parseEntry(line []byte) (Entry, error) {
	canon, fields, err := canonicalFields(line, entryFields)
	if err != nil {
		return Entry{}, err
	}
	if len(fields) != len(entryFields) {
		for k := range fields {
			if !isEntryField(k) {
				return Entry{}, fmt.Errorf("unknown field %q", k)
			}
		}
	}
	var e Entry
	if err := json.Unmarshal(canon, &e); err != nil {
		return Entry{}, fmt.Errorf("bad field: %w", err)
	}
	if err := checkEntry(e, fields["ts"]); err != nil {
		return Entry{}, err
	}
	delete(fields, "hash")
	raw, err := json.Marshal(fields)
	if err != nil {
		return Entry{}, fmt.Errorf("re-encode: %w", err)
	}
	body, err := jcs.Transform(raw)
	if err != nil {
		return Entry{}, fmt.Errorf("canonicalize: %w", err)
	}
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != e.Hash {
		return e, fmt.Errorf("%w: recorded %s, computed %x", errHashMismatch, e.Hash, sum)
	}
	if at := writtenFormDiff(line, body, e.Hash); at >= 0 {
		return e, fmt.Errorf("%w: from byte %d on, the line differs from the RFC 8785 form its hash covers", errNotCanonical, at)
	}
	return e, nil
}

// writtenFormDiff returns -1 when line is exactly what the writer makes of
// the canonical body and its hash (appendLine: the body with the hash
// member inserted before its closing brace), else the offset of the first
// byte that differs. The writer has only ever written that form.
func writtenFormDiff(line, body []byte, hash string) int {
	n := len(body) - 1 // the body without its closing brace
	want := make([]byte, 0, n+hashSuffixLen)
	want = append(want, body[:n]...)
	want = append(want, hashKey...)
	want = append(want, hash...)
	want = append(want, `"}`...)
	for i := range min(len(line), len(want)) {
		if line[i] != want[i] {
			return i
		}
	}
	if len(line) != len(want) {
		return min(len(line), len(want))
	}
	return -1
}

// parseOwnEntry is the fast parse Open uses on the tail of its own segment.
// Lines the writer produced hash exactly as they are laid out (the body is
// already canonical), so the hash is checked on the raw bytes and the strict
// parse is only needed for a line that fails that check.
func parseOwnEntry(line []byte) (Entry, error) {
	var e Entry
	n := len(line) - hashSuffixLen
	if n > 0 && bytes.HasPrefix(line[n:], []byte(hashKey)) && json.Unmarshal(line, &e) == nil && checkEntry(e, nil) == nil {
		h := sha256.New()
		h.Write(line[:n])
		h.Write([]byte{'}'})
		if hex.EncodeToString(h.Sum(nil)) == e.Hash {
			return e, nil
		}
	}
	return parseEntry(line)
}

// checkEntry checks the values the types alone do not; rawTS (when given)
// is the ts field as written.
func checkEntry(e Entry, rawTS json.RawMessage) error {
	switch {
	case e.Seq < 1:
		return fmt.Errorf("seq %d is not positive", e.Seq)
	case e.Chain == "":
		return errors.New("empty chain")
	case e.Kind == "":
		return errors.New("empty kind")
	case !isHex64(e.Hash):
		return errors.New("hash is not 64 lowercase hex digits")
	case !isHex64(e.PrevHash):
		return errors.New("prev_hash is not 64 lowercase hex digits")
	case e.PayloadSHA256 != "" && !isHex64(e.PayloadSHA256):
		return errors.New("payload_sha256 is neither empty nor 64 lowercase hex digits")
	case len(e.Summary) == 0 || e.Summary[0] != '{':
		return errors.New("summary is not an object")
	case rawTS != nil && !bytes.HasSuffix(rawTS, []byte(`Z"`)):
		return errors.New("ts is not UTC (must end in Z)")
	}
	return nil
}

func isEntryField(k string) bool {
	for _, f := range entryFields {
		if f == k {
			return true
		}
	}
	return false
}

func isHex64(s string) bool { return len(s) == 64 && isLowerHex(s) }

// isLowerHex reports whether s is lowercase hex digits only.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
