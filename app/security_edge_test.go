package app

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fromAddr is an HTTP client whose connections come from the given local
// address (any 127.0.0.0/8 address is this machine), so a test can be two
// sources at once.
func fromAddr(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// A flood of wrong tokens used to write one fsynced auth.failure entry each
// (3.8 MB/s of trail at 19k req/s). Now the first failure of the source is
// written, the source gets 429 before any work once past its budget, the
// repeats wait for one counted entry, and an agent at another address is
// served throughout.
func TestSecurityAuthFailureFloodIsBoundedPerSource(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	attacker, agent := fromAddr("127.0.0.2"), fromAddr("127.0.0.1")
	var unauthorized, limited int
	for range 2000 {
		req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"mock-1","messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Authorization", "Bearer wrong-token")
		req.Header.Set("Content-Type", "application/json")
		resp, err := attacker.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			unauthorized++
		case http.StatusTooManyRequests:
			limited++
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if unauthorized > 40 || limited < 1900 {
		t.Errorf("%d answered 401, %d refused 429: the source was not limited", unauthorized, limited)
	}
	if n := len(g.entries("auth.failure")); n > 3 {
		t.Errorf("2000 failed authentications wrote %d auth.failure entries", n)
	}
	resp, err := agent.Do(authed(g.srv.URL+"/v1/models", "tok-orch_1"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("an agent at another address was not served: %v %v", err, resp)
	}
	resp.Body.Close()
}

func authed(url, token string) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}

// A body that trickles and stops used to hold its connection (and a
// goroutine) for ever; it is cut after http.body_idle_timeout with 408.
func TestSecuritySlowBodyIsCut(t *testing.T) {
	g := newA2A(t, a2aOpts{messagingExtra: "http:\n  body_idle_timeout: 300ms\n"})
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	_, _ = io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-orch_1\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || time.Since(start) > 3*time.Second {
		t.Fatalf("status %d after %s", resp.StatusCode, time.Since(start))
	}
}

// The review login reads no more than a small form, and a source past its
// budget of failed sign-ins is refused before the form is parsed.
func TestSecurityReviewLoginBounded(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	post := func(body string) int {
		req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/review/login", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", g.srv.URL)
		resp, err := fromAddr("127.0.0.3").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post("token=" + strings.Repeat("a", 1<<20)); st < 400 || st == http.StatusUnauthorized {
		t.Fatalf("a 1 MB form was parsed (%d)", st)
	}
	statuses := map[int]int{}
	for range 40 {
		statuses[post("token=wrong")]++
	}
	if statuses[http.StatusTooManyRequests] == 0 {
		t.Fatalf("failed sign-ins never limited: %v", statuses)
	}
}

// At a sidecar, a token-less request acts as the agent; a web page could
// make a browser send one. Requests that look like they come from a page
// are refused; a local process's JSON request is served.
func TestSecuritySidecarRefusesBrowserRequests(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	a, err := Build(g.cfg, Options{Sidecar: "planner_1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.server.Handler())
	defer srv.Close()
	body := `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		note, ct, origin string
		want             int
	}{
		{"text/plain from a page", "text/plain", "https://evil.example", http.StatusUnauthorized},
		{"text/plain without Origin", "text/plain", "", http.StatusUnauthorized},
		{"JSON with an Origin", "application/json", "https://evil.example", http.StatusUnauthorized},
		{"a local process", "application/json", "", http.StatusOK},
	} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", tc.ct)
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.note, resp.StatusCode, tc.want)
		}
	}
}
