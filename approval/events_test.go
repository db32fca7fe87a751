package approval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/internal/testredis"
)

// stream is a client of GET /agent/events.
type stream struct {
	status   int
	events   chan sseEvent
	comments chan string
	done     chan struct{} // closed when the server ended the stream
	cancel   context.CancelFunc
}

type sseEvent struct {
	name string
	data map[string]any
}

func openStream(t *testing.T, base, token string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/agent/events", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &stream{status: res.StatusCode, events: make(chan sseEvent, 100), comments: make(chan string, 100), done: make(chan struct{}), cancel: cancel}
	t.Cleanup(func() { cancel(); <-s.done })
	if res.StatusCode != http.StatusOK {
		_ = res.Body.Close()
		close(s.done)
		return s
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	go func() {
		defer close(s.done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var name, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if name != "" {
					var m map[string]any
					if err := json.Unmarshal([]byte(data), &m); err != nil {
						t.Errorf("event data %q: %v", data, err)
					}
					s.events <- sseEvent{name, m}
				}
				name, data = "", ""
			case strings.HasPrefix(line, ":"):
				s.comments <- strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "event: "):
				name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data = line[len("data: "):]
			}
		}
	}()
	return s
}

// next returns the stream's next event within a few seconds.
func (s *stream) next(t *testing.T) sseEvent {
	t.Helper()
	select {
	case ev := <-s.events:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return sseEvent{}
}

// states reads n events and returns "id state status" for each.
func (s *stream) states(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ev := s.next(t)
		if ev.name != "state" {
			t.Errorf("event %q", ev.name)
		}
		keys := make([]string, 0, len(ev.data))
		for k := range ev.data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"at", "request_id", "state", "status"}) {
			t.Errorf("event data keys %v", keys)
		}
		status := "null"
		if st, ok := ev.data["status"].(string); ok {
			status = st
		}
		out = append(out, ev.data["request_id"].(string)+" "+ev.data["state"].(string)+" "+status)
	}
	return out
}

// quiet checks that no event arrives for a moment.
func (s *stream) quiet(t *testing.T) {
	t.Helper()
	select {
	case ev := <-s.events:
		t.Errorf("unexpected event %+v", ev)
	case <-time.After(200 * time.Millisecond):
	}
}

// Each agent sees its own requests' state changes, in order, and only
// those: the policy's verdict, a person's, a REPORT, an expiry.
func TestEventsStreamOwnRequests(t *testing.T) {
	h := newHarness(t)
	claude := openStream(t, h.srv.URL, tokClaude)
	copilot := openStream(t, h.srv.URL, tokCopilot)
	mustStatus(t, result{status: claude.status}, http.StatusOK)
	if c := <-claude.comments; c != "connected" {
		t.Errorf("first comment %q", c)
	}

	id := approveOne(t, h)
	if got, want := claude.states(t, 2), []string{id + " VALIDATING null", id + " APPROVED approved"}; !slices.Equal(got, want) {
		t.Fatalf("approval: %v, want %v", got, want)
	}
	reportDone(h, id)
	if got := claude.states(t, 1); got[0] != id+" COMPLETED approved" {
		t.Fatalf("report: %v", got)
	}

	esc := escalate(t, h, "x")
	mustStatus(t, h.do(http.MethodPost, "/admin/escalations/"+esc+"/decision", tokReviewer, map[string]any{"decision": "approve"}), http.StatusOK)
	if got, want := claude.states(t, 3), []string{esc + " VALIDATING null", esc + " ESCALATED escalated", esc + " APPROVED approved"}; !slices.Equal(got, want) {
		t.Fatalf("escalation: %v, want %v", got, want)
	}
	h.clock.Advance(25 * time.Hour)
	h.svc.ExpireApprovals(t.Context())
	if got := claude.states(t, 1); got[0] != esc+" EXPIRED rejected" {
		t.Fatalf("expiry: %v", got)
	}

	// copilot's own query shows on its stream; claude's never did.
	res, q := h.submit(tokCopilot, map[string]any{"agent_id": "copilot-2", "request_type": "QUERY", "content": "auth?"})
	mustStatus(t, res, http.StatusOK)
	if got := copilot.states(t, 2); got[0] != q.RequestID+" VALIDATING null" || got[1] != q.RequestID+" COMPLETED approved" {
		t.Fatalf("copilot: %v", got)
	}
	copilot.quiet(t)
	claude.quiet(t)
}

// Keep-alive comments on an idle stream; the stream ends when the client
// leaves (its place is freed) and when the Service stops.
func TestEventsKeepAliveAndEnd(t *testing.T) {
	h := newHarness(t, func(d *Deps) { d.EventKeepAlive = 30 * time.Millisecond })
	s := openStream(t, h.srv.URL, tokClaude)
	<-s.comments // connected
	select {
	case c := <-s.comments:
		if c != "keep-alive" {
			t.Fatalf("comment %q", c)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no keep-alive")
	}
	s.cancel()
	<-s.done
	waitFor(t, "the stream's subscriber to go", func() bool { return hubSize(h.svc) == 0 })

	s = openStream(t, h.srv.URL, tokClaude)
	waitFor(t, "the stream to subscribe", func() bool { return hubSize(h.svc) == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { h.svc.Run(ctx); close(ran) }()
	cancel()
	<-ran
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream outlived the Service")
	}
}

func hubSize(s *Service) int {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.hub.n
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for " + what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEventsRefusals(t *testing.T) {
	h := newHarness(t)
	if s := openStream(t, h.srv.URL, ""); s.status != http.StatusUnauthorized {
		t.Errorf("no token: %d", s.status)
	}
	for i := range maxStreamsPerAgent {
		if s := openStream(t, h.srv.URL, tokClaude); s.status != http.StatusOK {
			t.Fatalf("stream %d: %d", i+1, s.status)
		}
	}
	if s := openStream(t, h.srv.URL, tokClaude); s.status != http.StatusTooManyRequests {
		t.Errorf("one stream too many: %d", s.status)
	}
	// Another agent's streams are counted apart.
	if s := openStream(t, h.srv.URL, tokCopilot); s.status != http.StatusOK {
		t.Errorf("copilot: %d", s.status)
	}
}

// Two replicas on one Redis: a stream on one sees the changes made on the
// other; the replica holds its Redis subscription only while it has
// streams; a Redis that is down is a 503, not a silent stream.
func TestEventsAcrossReplicas(t *testing.T) {
	srv := testredis.Start(t)
	c := srv.Client(t)
	a := newHarness(t, func(d *Deps) { d.Store = NewRedisStore(srv.Client(t)) })
	b := newHarness(t, func(d *Deps) { d.Store = NewRedisStore(srv.Client(t)) })
	channel := NewRedisStore(c).eventsChannel()
	subscribers := func() int64 {
		n, err := c.PubSubNumSub(t.Context(), channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[channel]
	}

	s := openStream(t, a.srv.URL, tokClaude)
	mustStatus(t, result{status: s.status}, http.StatusOK)
	if n := subscribers(); n != 1 {
		t.Fatalf("%d subscriptions, want replica a's", n)
	}
	id := approveOne(t, b)
	if got, want := s.states(t, 2), []string{id + " VALIDATING null", id + " APPROVED approved"}; !slices.Equal(got, want) {
		t.Fatalf("events from replica b: %v, want %v", got, want)
	}
	res, q := b.submit(tokCopilot, map[string]any{"agent_id": "copilot-2", "request_type": "QUERY", "content": "auth?"})
	mustStatus(t, res, http.StatusOK)
	reportDone(b, id)
	if got := s.states(t, 1); got[0] != id+" COMPLETED approved" {
		t.Fatalf("after copilot's %s: %v", q.RequestID, got)
	}

	s.cancel()
	<-s.done
	waitFor(t, "replica a to unsubscribe", func() bool { return subscribers() == 0 })

	srv.Stop()
	if s := openStream(t, a.srv.URL, tokClaude); s.status != http.StatusServiceUnavailable {
		t.Fatalf("Redis down: %d", s.status)
	}
}

// receiver is an agent's callback endpoint that answers from a script.
type receiver struct {
	mu      sync.Mutex
	bodies  []map[string]any
	answers []int // per attempt; then 200
	release chan struct{}
	srv     *httptest.Server
}

func newReceiver(t *testing.T, answers ...int) *receiver {
	r := &receiver{answers: answers}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.release != nil {
			<-r.release
		}
		var m map[string]any
		b, _ := io.ReadAll(req.Body)
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &m) != nil {
			t.Errorf("callback %s %s %q", req.Method, req.Header.Get("Content-Type"), b)
		}
		r.mu.Lock()
		r.bodies = append(r.bodies, m)
		code := http.StatusOK
		if len(r.answers) > 0 {
			code, r.answers = r.answers[0], r.answers[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.bodies {
		out = append(out, m["state"].(string))
	}
	return out
}

// lockedBuffer is a log destination goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The agent's callback_url gets the same events, retried when the
// receiver fails for a while, given up when it refuses or keeps failing.
func TestEventCallbacks(t *testing.T) {
	for _, tc := range []struct {
		note     string
		answers  []int
		attempts int      // POSTs the receiver sees
		states   []string // the events it sees, attempts included
		logged   string
	}{
		{"delivered", nil, 2, []string{"VALIDATING", "APPROVED"}, ""},
		{"retried until accepted", []int{503, 429}, 4, []string{"VALIDATING", "VALIDATING", "VALIDATING", "APPROVED"}, ""},
		{"refused: not retried", []int{400}, 2, []string{"VALIDATING", "APPROVED"}, "callback answered 400"},
		{"failing: given up", []int{500, 500, 500}, 4, []string{"VALIDATING", "VALIDATING", "VALIDATING", "APPROVED"}, "attempts=3"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			rcv := newReceiver(t, tc.answers...)
			logs := &lockedBuffer{}
			h := newHarness(t, func(d *Deps) {
				d.Config.Agents["claude-3"].CallbackURL = rcv.srv.URL + "/hook?key=secret"
				d.Log = slog.New(slog.NewTextHandler(logs, nil))
			})
			approveOne(t, h)
			h.svc.notifying.Wait()
			if got := rcv.got(); !slices.Equal(got, tc.states) || len(got) != tc.attempts {
				t.Fatalf("receiver saw %v, want %v", got, tc.states)
			}
			out := logs.String()
			if tc.logged != "" && !strings.Contains(out, tc.logged) {
				t.Errorf("log lacks %q:\n%s", tc.logged, out)
			}
			if strings.Contains(out, "secret") {
				t.Errorf("the callback URL was logged:\n%s", out)
			}
		})
	}
}

// A callback that hangs holds up neither the request nor anyone else.
func TestEventCallbackNeverBlocks(t *testing.T) {
	rcv := newReceiver(t)
	rcv.release = make(chan struct{})
	h := newHarness(t, func(d *Deps) { d.Config.Agents["claude-3"].CallbackURL = rcv.srv.URL })
	s := openStream(t, h.srv.URL, tokClaude)
	start := time.Now()
	id := approveOne(t, h)
	if d := time.Since(start); d > time.Second {
		t.Errorf("the request took %v behind a hanging callback", d)
	}
	if got := s.states(t, 2); got[1] != id+" APPROVED approved" {
		t.Errorf("stream behind a hanging callback: %v", got)
	}
	close(rcv.release)
	h.svc.notifying.Wait()
	if got := rcv.got(); !slices.Equal(got, []string{"VALIDATING", "APPROVED"}) {
		t.Errorf("receiver saw %v", got)
	}
}

// Callbacks go through the Service's HTTP client: the gateway's egress
// client refuses a loopback callback_url unless allowed.
func TestEventCallbackEgressChecked(t *testing.T) {
	rcv := newReceiver(t)
	logs := &lockedBuffer{}
	h := newHarness(t, func(d *Deps) {
		d.Config.Agents["claude-3"].CallbackURL = rcv.srv.URL
		d.HTTPClient = egress.Policy{}.Client(5 * time.Second)
		d.Log = slog.New(slog.NewTextHandler(logs, nil))
	})
	approveOne(t, h)
	h.svc.notifying.Wait()
	if got := rcv.got(); len(got) != 0 {
		t.Fatalf("a loopback callback was reached: %v", got)
	}
	// Refused by policy: final at once, not retried.
	if out := logs.String(); !strings.Contains(out, "approval callback failed") || !strings.Contains(out, "destination not allowed") ||
		strings.Count(out, "attempts=1") != 2 {
		t.Errorf("log:\n%s", out)
	}
}
