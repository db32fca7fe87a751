package redact

import (
	"maps"
	"strings"
)

// MaxValueLen is the longest value for which a Stream is exact: for any
// split of a text into chunks, the concatenated output of Write and Flush
// equals String of the whole text, as long as no key, JWT or keyword secret
// runs longer than MaxValueLen bytes (every other kind is shorter by its
// format). A longer one that is still undecided after MaxValueLen bytes is
// replaced at once and the rest of its run dropped as it arrives, so it
// never shows through; only then may the output differ from String's.
// MaxValueLen is also what bounds the text a Stream holds back.
const MaxValueLen = 4096

// lookBehind is how far before the first possible start detectors read
// (at most a 64-byte keyword and its separator before a value), and so how
// much already emitted text a Stream keeps as context.
const lookBehind = 96

// A Stream redacts a text that arrives in chunks, such as the content deltas
// of an SSE answer. It holds back a short tail that may be the start of a
// value still being written. A Stream is not safe for concurrent use; make
// one per stream with Redactor.Stream.
type Stream struct {
	r  *Redactor
	sc scanner

	// buf is the kept text: context already emitted, then pending text.
	buf string
	// lo is where in buf candidates may start: everything before was
	// settled by an earlier call.
	lo int
	// from is where in buf output continues: buf[:from] is emitted.
	from int
	// swallow is non-zero after an oversized value was replaced: bytes of
	// these classes continue its run and are dropped.
	swallow uint16

	res     Result
	blocked bool
}

// Stream starts redacting a new chunked text.
func (r *Redactor) Stream() *Stream { return &Stream{r: r} }

// Write adds the next chunk and returns the text that is safe to send now,
// possibly "". Once a blocking detector matched, Write returns "" for good:
// the value's bytes were never returned, and neither is anything after.
func (st *Stream) Write(chunk string) string {
	if st.blocked || chunk == "" {
		return ""
	}
	if st.swallow != 0 {
		k := 0
		for k < len(chunk) && class[chunk[k]]&st.swallow != 0 {
			k++
		}
		st.keepContext(chunk[:k])
		if k == len(chunk) {
			return ""
		}
		chunk, st.swallow = chunk[k:], 0
	}
	return st.process(st.buf+chunk, false)
}

// Flush ends the text and returns what was held back. Writing again starts
// a new text.
func (st *Stream) Flush() string {
	if st.blocked {
		return ""
	}
	out := st.process(st.buf, true)
	st.buf, st.lo, st.from, st.swallow = "", 0, 0, 0
	return out
}

// Result returns the counts so far and the blocking detector, if any.
func (st *Stream) Result() Result {
	return Result{Counts: maps.Clone(st.res.Counts), Blocked: st.res.Blocked}
}

// Blocked reports whether a blocking detector matched; the caller ends the
// answer (finish_reason "content_filter").
func (st *Stream) Blocked() bool { return st.blocked }

// process scans text (kept text plus the new chunk) and emits everything
// before the earliest undecided candidate, the hold. Candidates that start
// before it are final: String of the whole text finds them too, and replaces
// them the same way, since replacement walks candidates in start order.
func (st *Stream) process(text string, final bool) string {
	sc := &st.sc
	sc.reset(text, st.lo, final, &st.r.on)
	sc.scan()
	n, h := len(text), sc.hold

	var b strings.Builder
	e := emitter{r: st.r, b: &b, res: &st.res}
	e.segments(text, sc.cands, st.from, h)
	lo := h
	if n-h > MaxValueLen {
		// An undecided key or token this long: replace it now, and drop the
		// rest of its run as it arrives (see MaxValueLen).
		if st.r.block[sc.holdDet] && st.res.Blocked == "" {
			st.res.Blocked = detectorNames[sc.holdDet]
		}
		if start := max(h, e.pos); start < n {
			e.replace(text, start, n, sc.holdDet)
		}
		st.swallow, lo = sc.holdRun, n
	}
	if st.res.Blocked != "" {
		st.blocked, st.buf = true, ""
		return ""
	}
	cut := max(lo, e.pos)

	var out string
	if b.Len() == 0 {
		out = text[st.from:cut]
	} else {
		b.WriteString(text[e.last:cut])
		out = b.String()
	}

	keep := max(0, lo-lookBehind)
	st.buf, st.lo, st.from = text[keep:], lo-keep, cut-keep
	if keep > len(st.buf) {
		// Do not pin a large chunk for the sake of its small tail.
		st.buf = strings.Clone(st.buf)
	}
	return out
}

// keepContext appends dropped bytes to the context, as they precede
// whatever comes next.
func (st *Stream) keepContext(dropped string) {
	if len(dropped) >= lookBehind {
		st.buf = strings.Clone(dropped[len(dropped)-lookBehind:])
	} else {
		text := st.buf + dropped
		st.buf = text[max(0, len(text)-lookBehind):]
	}
	st.lo, st.from = len(st.buf), len(st.buf)
}
