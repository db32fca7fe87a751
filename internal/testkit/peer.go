package testkit

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Peer is an agent's message endpoint for tests of agent-to-agent traffic:
// a real HTTP server (TLS when given a config) that records what the
// gateway hands it and answers with its handler, 202 Accepted by default.
type Peer struct {
	// Srv is the server; its URL is the agent's endpoint.
	Srv *httptest.Server

	t       testing.TB
	mu      sync.Mutex
	got     []Received
	handler func(w http.ResponseWriter, r *http.Request, body []byte)
}

// Received is one message a Peer got: the body and the headers it came
// with.
type Received struct {
	Body   []byte
	Header http.Header
}

// NewPeer starts a peer, served over TLS with tc (plain HTTP when nil),
// and closes it when the test ends.
func NewPeer(t testing.TB, tc *tls.Config) *Peer {
	p := &Peer{t: t}
	p.Srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.got = append(p.got, Received{Body: body, Header: r.Header.Clone()})
		h := p.handler
		p.mu.Unlock()
		if h == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		h(w, r, body)
	}))
	if tc != nil {
		p.Srv.TLS = tc
		p.Srv.StartTLS()
	} else {
		p.Srv.Start()
	}
	t.Cleanup(p.Srv.Close)
	return p
}

// Set makes h answer the messages from now on.
func (p *Peer) Set(h func(w http.ResponseWriter, r *http.Request, body []byte)) {
	p.mu.Lock()
	p.handler = h
	p.mu.Unlock()
}

// Received returns what the peer got so far, oldest first.
func (p *Peer) Received() []Received {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Received(nil), p.got...)
}

// WaitFor polls until n messages arrived (10 s at most, then the test
// fails) and returns them.
func (p *Peer) WaitFor(n int) []Received {
	p.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if got := p.Received(); len(got) >= n {
			return got
		}
	}
	p.t.Fatalf("peer got %d messages, want %d", len(p.Received()), n)
	return nil
}

// ReplyWith is a Peer handler answering every message with the JSON
// envelope reply(request).
func ReplyWith(reply func(req map[string]any) string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, body []byte) {
		var req map[string]any
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply(req))
	}
}
