// Command mcpload drives MCP tools/call load against one Streamable HTTP
// endpoint: the gateway's /mcp/{server}, a bare proxy in front of an MCP
// server, or the server itself.
//
// Each of -clients clients opens its own session (initialize, then
// notifications/initialized) and then calls -tool in a loop, one call at a
// time, until -duration has passed. With -token containing %d each client
// is its own agent: client i (from 1) sends the bearer token with %d
// replaced by i, so 16 clients are 16 agents with a session each.
//
// The driver speaks JSON-RPC over net/http itself rather than through the
// MCP Go SDK client: the bench measures the targets' CPU, and a driver
// that shares the machine must spend as little of it as possible and never
// be the bottleneck. Answers are checked as a client would: status 200, a
// JSON-RPC result (as JSON or as an event stream's message) without
// "isError": true.
//
// It prints one line:
//
//	calls=N errors=E calls_per_s=R p50_us=A p99_us=B clients=C duration=D
//
// followed by the first error seen, if any, and exits 1 when a session could
// not be opened or any call failed.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const protocol = "2025-06-18"

type config struct {
	url, token, tool, args string
	clients                int
	duration               time.Duration
}

// stats are the run's outcome, merged from every client.
type stats struct {
	calls, errors atomic.Int64
	mu            sync.Mutex
	firstErr      error
	lat           []time.Duration
}

func (s *stats) fail(err error) {
	s.errors.Add(1)
	s.mu.Lock()
	if s.firstErr == nil {
		s.firstErr = err
	}
	s.mu.Unlock()
}

// client is one agent's session.
type client struct {
	cfg     *config
	hc      *http.Client
	token   string
	session string
	buf     bytes.Buffer
	body    []byte
}

func main() {
	var cfg config
	flag.StringVar(&cfg.url, "url", "http://127.0.0.1:18093/mcp/bench", "the MCP endpoint")
	flag.StringVar(&cfg.token, "token", "", "bearer token; %d is replaced by the client's number (1..clients); empty: none")
	flag.StringVar(&cfg.tool, "tool", "echo", "the tool to call")
	flag.StringVar(&cfg.args, "args", `{"text":"a short note"}`, "the tool's arguments, a JSON object")
	flag.IntVar(&cfg.clients, "clients", 16, "concurrent clients, each with its own session")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to call")
	flag.Parse()
	if cfg.clients < 1 || cfg.duration <= 0 {
		fmt.Fprintln(os.Stderr, "mcpload: -clients and -duration must be positive")
		os.Exit(2)
	}
	st, elapsed, err := run(&cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcpload: %v\n", err)
		os.Exit(1)
	}
	report(os.Stdout, &cfg, st, elapsed)
	if st.errors.Load() > 0 {
		os.Exit(1)
	}
}

// run opens every session first, then lets all clients call at once.
func run(cfg *config) (*stats, time.Duration, error) {
	// One connection per client, kept: Go's default keeps two idle.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.clients, DisableCompression: true}, Timeout: 30 * time.Second}
	clients := make([]*client, cfg.clients)
	for i := range clients {
		c := &client{cfg: cfg, hc: hc}
		if cfg.token != "" {
			c.token = strings.ReplaceAll(cfg.token, "%d", strconv.Itoa(i+1))
		}
		if err := c.open(); err != nil {
			return nil, 0, fmt.Errorf("client %d: open a session: %w", i+1, err)
		}
		clients[i] = c
	}
	st := &stats{}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range clients {
		wg.Go(func() { c.loop(ctx, st) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, c := range clients {
		c.close()
	}
	return st, elapsed, nil
}

func (c *client) open() error {
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + protocol +
		`","capabilities":{},"clientInfo":{"name":"mcpload","version":"1"}}}`
	resp, body, err := c.post(context.Background(), []byte(init))
	if err != nil {
		return err
	}
	if err := resultOf(resp, body); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if c.session = resp.Header.Get("Mcp-Session-Id"); c.session == "" {
		return fmt.Errorf("initialize: no Mcp-Session-Id in the answer's headers")
	}
	resp, _, err = c.post(context.Background(), []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("notifications/initialized: status %d", resp.StatusCode)
	}
	return nil
}

// loop calls the tool until ctx ends; a call cut by the end is not counted.
func (c *client) loop(ctx context.Context, st *stats) {
	head := []byte(`{"jsonrpc":"2.0","id":`)
	tail := []byte(`,"method":"tools/call","params":{"name":` + strconv.Quote(c.cfg.tool) + `,"arguments":` + c.cfg.args + `}}`)
	lat := make([]time.Duration, 0, 1<<14)
	for id := 1; ctx.Err() == nil; id++ {
		c.body = append(strconv.AppendInt(append(c.body[:0], head...), int64(id), 10), tail...)
		t0 := time.Now()
		resp, body, err := c.post(ctx, c.body)
		if ctx.Err() != nil {
			break
		}
		if err == nil {
			err = resultOf(resp, body)
		}
		if err != nil {
			st.fail(fmt.Errorf("tools/call: %w", err))
			continue
		}
		lat = append(lat, time.Since(t0))
		st.calls.Add(1)
	}
	st.mu.Lock()
	st.lat = append(st.lat, lat...)
	st.mu.Unlock()
}

// close ends the session (best effort).
func (c *client) close() {
	req, err := http.NewRequest(http.MethodDelete, c.cfg.url, nil)
	if err != nil {
		return
	}
	c.headers(req)
	if resp, err := c.hc.Do(req); err == nil {
		c.buf.Reset()
		_, _ = c.buf.ReadFrom(resp.Body)
		resp.Body.Close()
	}
}

func (c *client) headers(req *http.Request) {
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"application/json, text/event-stream"}
	if c.token != "" {
		h["Authorization"] = []string{"Bearer " + c.token}
	}
	if c.session != "" {
		h["Mcp-Session-Id"] = []string{c.session}
		h["Mcp-Protocol-Version"] = []string{protocol}
	}
}

// post sends one message and reads the whole answer into c.buf.
func (c *client) post(ctx context.Context, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	c.headers(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	c.buf.Reset()
	if _, err := c.buf.ReadFrom(resp.Body); err != nil {
		return nil, nil, fmt.Errorf("read the answer: %w", err)
	}
	return resp, c.buf.Bytes(), nil
}

// resultOf checks an answer to a request: 200, one JSON-RPC result (the
// body, or an event stream's data), and no tool error.
func resultOf(resp *http.Response, body []byte) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, clip(body))
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		i := bytes.Index(body, []byte("data:"))
		if i < 0 {
			return fmt.Errorf("an event stream without data: %s", clip(body))
		}
		body = body[i+len("data:"):]
	}
	switch {
	case !bytes.Contains(body, []byte(`"result":`)):
		return fmt.Errorf("no result: %s", clip(body))
	case bytes.Contains(body, []byte(`"isError":true`)):
		return fmt.Errorf("the tool failed: %s", clip(body))
	}
	return nil
}

func clip(b []byte) string {
	if len(b) > 300 {
		b = b[:300]
	}
	return strings.TrimSpace(string(b))
}

func report(w *os.File, cfg *config, st *stats, elapsed time.Duration) {
	slices.Sort(st.lat)
	pct := func(p float64) int64 {
		if len(st.lat) == 0 {
			return 0
		}
		return st.lat[min(len(st.lat)-1, int(p*float64(len(st.lat))))].Microseconds()
	}
	calls := st.calls.Load()
	fmt.Fprintf(w, "calls=%d errors=%d calls_per_s=%.1f p50_us=%d p99_us=%d clients=%d duration=%s\n",
		calls, st.errors.Load(), float64(calls)/elapsed.Seconds(), pct(0.50), pct(0.99), cfg.clients, elapsed.Round(time.Millisecond))
	if st.firstErr != nil {
		fmt.Fprintf(w, "first error: %v\n", st.firstErr)
	}
}
