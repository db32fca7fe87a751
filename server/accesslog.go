package server

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/sacpgw/gateway/internal/jsonlex"
)

// The access log writes one line per request. Through slog's JSON handler
// that line cost 13–45 µs of CPU under load (a Record, an attribute slice,
// the handler's generic encoding); written directly, in exactly the
// handler's format, it costs a few. NewJSONLogger makes a logger whose
// handler the server recognises: its access lines are encoded here, every
// other line still goes through slog.

// JSONHandler is slog's JSON handler with the writer exposed, so that the
// server's access log can write lines of the same format to it directly.
// Lines from both are written whole, under one lock.
type JSONHandler struct {
	*slog.JSONHandler
	out *lockedWriter
}

// NewJSONLogger is slog.New(slog.NewJSONHandler(w, opts)) whose access
// lines the server pre-encodes. opts.ReplaceAttr and opts.AddSource must be
// unset (they would change the format): with either, it is the plain JSON
// handler.
func NewJSONLogger(w io.Writer, opts *slog.HandlerOptions) *slog.Logger {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	if opts.ReplaceAttr != nil || opts.AddSource {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	out := &lockedWriter{w: w}
	return slog.New(&JSONHandler{JSONHandler: slog.NewJSONHandler(out, opts), out: out})
}

// WithAttrs and WithGroup return the plain handler: a line with attributes
// or groups added is not the access log's format.
func (h *JSONHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.JSONHandler.WithAttrs(attrs)
}

// WithGroup: see WithAttrs.
func (h *JSONHandler) WithGroup(name string) slog.Handler { return h.JSONHandler.WithGroup(name) }

// Enabled is the JSON handler's.
func (h *JSONHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.JSONHandler.Enabled(ctx, l)
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// fieldSink receives the access line's fields in order: slog attributes,
// or the pre-encoded line.
type fieldSink interface {
	str(key, v string)
	int(key string, v int64)
	float(key string, v float64)
	bool(key string, v bool)
}

// attrSink collects the fields as slog attributes.
type attrSink struct{ attrs []slog.Attr }

func (a *attrSink) str(k, v string)           { a.attrs = append(a.attrs, slog.String(k, v)) }
func (a *attrSink) int(k string, v int64)     { a.attrs = append(a.attrs, slog.Int64(k, v)) }
func (a *attrSink) float(k string, v float64) { a.attrs = append(a.attrs, slog.Float64(k, v)) }
func (a *attrSink) bool(k string, v bool)     { a.attrs = append(a.attrs, slog.Bool(k, v)) }
func (l *lineSink) str(k, v string)           { l.key(k); l.b = appendJSONString(l.b, v) }
func (l *lineSink) int(k string, v int64)     { l.key(k); l.b = strconv.AppendInt(l.b, v, 10) }
func (l *lineSink) float(k string, v float64) { l.key(k); l.b = appendJSONFloat(l.b, v) }
func (l *lineSink) bool(k string, v bool)     { l.key(k); l.b = strconv.AppendBool(l.b, v) }
func (l *lineSink) key(k string) {
	l.b = append(l.b, ',')
	l.b = appendJSONString(l.b, k)
	l.b = append(l.b, ':')
}
func (l *lineSink) begin(t time.Time, lv slog.Level, msg string) {
	l.b = append(l.b[:0], `{"time":"`...)
	l.b = t.AppendFormat(l.b, time.RFC3339Nano)
	l.b = append(l.b, `","level":`...)
	l.b = appendJSONString(l.b, lv.String())
	l.b = append(l.b, `,"msg":`...)
	l.b = appendJSONString(l.b, msg)
}

// lineSink encodes the fields as the JSON handler would.
type lineSink struct{ b []byte }

var lines = sync.Pool{New: func() any { return &lineSink{b: make([]byte, 0, 512)} }}

// writeLine writes one pre-encoded line of fields to h's writer, stamped
// now, as h would have written it.
func (h *JSONHandler) writeLine(lv slog.Level, msg string, fields func(fieldSink)) {
	l := lines.Get().(*lineSink)
	l.begin(time.Now(), lv, msg)
	fields(l)
	l.b = append(l.b, "}\n"...)
	_, _ = h.out.Write(l.b)
	if cap(l.b) <= 16<<10 {
		lines.Put(l)
	}
}

// appendJSONString quotes s as slog's JSON handler does: encoding/json's
// escaping without the HTML escapes, invalid UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string) []byte { return jsonlex.AppendQuoted(b, s, true) }

// appendJSONFloat formats f as encoding/json does (which slog's handler
// calls for floats).
func appendJSONFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		// encoding/json refuses these; slog then writes the error. The
		// access log's floats are durations, never either.
		return append(b, '0')
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
