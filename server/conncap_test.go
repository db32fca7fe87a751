package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// The per-source cap is on connections that have not authenticated: a
// connection leaves the count as soon as its request is identified, not
// when its answer ends. Before, an agent (or every agent behind one load
// balancer) could hold at most conns_per_source streams at once.
func TestAuthenticatedStreamsAreNotCapped(t *testing.T) {
	const cap, streams = 4, 12
	release := make(chan struct{})
	started := make(chan struct{}, streams)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		started <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	st := newStack(t, stackOpts{upstreamURL: up.URL + "/v1", connsPerSource: cap, listen: true})
	var wg sync.WaitGroup
	results := make(chan string, streams)
	fail := func(why string) {
		close(release)
		wg.Wait()
		close(results)
		var got []string
		for r := range results {
			got = append(got, r)
		}
		t.Fatalf("%s (cap %d): %v", why, cap, got)
	}
	// The streams open one after another (each once the previous one is
	// under way) and stay open together.
	for i := range streams {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, st.srv.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer tok-alpha")
			req.Header.Set("Content-Type", "application/json")
			// One connection per stream, as concurrent streams are.
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := c.Do(req)
			if err != nil {
				results <- "error: " + err.Error()
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
				results <- "cut: " + string(b)
				return
			}
			results <- "ok"
		})
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			fail(fmt.Sprintf("stream %d of %d never reached the provider while the others were open", i+1, streams))
		}
	}
	close(release)
	wg.Wait()
	close(results)
	for r := range results {
		if r != "ok" {
			t.Errorf("stream: %s", r)
		}
	}
}
