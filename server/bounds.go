package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/sourceguard"
)

// Bounds limit what one client connection may hold (docs/security.md,
// "Flooding, connections and the state backend"): slow bodies, readers that
// take nothing, and sources that do not authenticate.
type Bounds struct {
	// ReadHeaderTimeout bounds the wait for a request's headers. Zero: 5s.
	ReadHeaderTimeout time.Duration
	// BodyIdle cuts a request body that sends nothing this long (408).
	// Zero: no limit.
	BodyIdle time.Duration
	// WriteIdle cuts a client that takes no byte of the answer this long;
	// each write extends it, so streams may run long. Zero: no limit.
	WriteIdle time.Duration
	// IdleTimeout closes keep-alive connections without requests. Zero: 120s.
	IdleTimeout time.Duration
	// ConnsPerSource caps the connections one address holds before one of
	// them authenticates. Zero: no cap.
	ConnsPerSource int
	// Sources refuses (429) addresses past their budget of failed
	// authentications, before any work. Nil: none.
	Sources *sourceguard.Guard
}

// guard is the first middleware after the request scope: a source past its
// failure budget is refused before anything is read, and the body and
// answer get their idle deadlines.
func (s *Server) guard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if g := s.bounds.Sources; g != nil {
			if ok, wait := g.Allow(door.RemoteIP(r)); !ok {
				secs := int((wait + time.Second - 1) / time.Second)
				return apierror.RateLimited(fmt.Sprintf("Too many failed authentications from your address; retry after %ds.", secs),
					http.Header{"Retry-After": {fmt.Sprint(secs)}})
			}
		}
		resp := c.Response()
		rc := http.NewResponseController(resp.Writer)
		if d := s.bounds.WriteIdle; d > 0 {
			// A deadline per request first: an answer with no body is written
			// only after the handler returns.
			_ = rc.SetWriteDeadline(time.Now().Add(d))
			resp.Writer = &idleWriter{ResponseWriter: resp.Writer, rc: rc, d: d}
		}
		if d := s.bounds.BodyIdle; d > 0 && r.Body != nil && r.Body != http.NoBody {
			r.Body = &idleBody{ReadCloser: r.Body, rc: rc, d: d}
		}
		// The connection leaves the unauthenticated count as soon as its
		// request is identified, not when the answer (a stream, maybe
		// long) ends.
		if ex := scope.Lookup(r.Context()); ex != nil {
			ctx := r.Context()
			ex.OnAuthenticated(func() { s.conns.authenticated(ctx) })
		}
		return next(c)
	}
}

// idleBody sets a read deadline before each read of the request body and
// clears it once the body is complete: a body that stalls is cut, a
// finished one leaves the connection's reads (which also watch for the
// client leaving) alone.
type idleBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	d    time.Duration
	done bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	_ = b.rc.SetReadDeadline(time.Now().Add(b.d))
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	// Any other error (the deadline) leaves the deadline passed: the server
	// then cannot wait for the rest of a stalled body after the answer,
	// and closes the connection instead.
	return n, err
}

// idleWriter extends the write deadline before each write and flush.
type idleWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *idleWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(p)
}

func (w *idleWriter) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// connTracker counts, per source address, the connections none of whose
// requests has authenticated yet, and closes new ones past the cap.
type connTracker struct {
	limit  int
	mu     sync.Mutex
	unauth map[string]int
	conns  map[net.Conn]*connInfo
}

type connInfo struct {
	ip                string
	counted, verified bool
}

type connKey struct{}

func newConnTracker(limit int) *connTracker {
	return &connTracker{limit: limit, unauth: map[string]int{}, conns: map[net.Conn]*connInfo{}}
}

// context is the server's ConnContext: the connection's info rides on its
// requests' contexts, so a request that authenticates can say so.
func (t *connTracker) context(ctx context.Context, c net.Conn) context.Context {
	if t == nil {
		return ctx
	}
	ip := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(ip); err == nil {
		ip = h
	}
	ci := &connInfo{ip: ip}
	t.mu.Lock()
	t.conns[c] = ci
	t.mu.Unlock()
	return context.WithValue(ctx, connKey{}, ci)
}

// state is the server's ConnState hook.
func (t *connTracker) state(c net.Conn, st http.ConnState) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ci := t.conns[c]
	if ci == nil {
		return
	}
	switch st {
	case http.StateNew:
		if t.unauth[ci.ip] >= t.limit {
			_ = c.Close() // over the cap: nothing of it is read
			return
		}
		t.unauth[ci.ip]++
		ci.counted = true
	case http.StateClosed, http.StateHijacked:
		t.release(ci)
		delete(t.conns, c)
	}
}

// authenticated takes the request's connection out of the count.
func (t *connTracker) authenticated(ctx context.Context) {
	ci, _ := ctx.Value(connKey{}).(*connInfo)
	if t == nil || ci == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !ci.verified {
		t.release(ci)
		ci.verified = true
	}
}

// release uncounts ci; the caller holds t.mu.
func (t *connTracker) release(ci *connInfo) {
	if !ci.counted {
		return
	}
	ci.counted = false
	if t.unauth[ci.ip]--; t.unauth[ci.ip] <= 0 {
		delete(t.unauth, ci.ip)
	}
}
