// Command upstream is the benchmark's mock model provider: a tiny
// OpenAI-compatible server whose answers are precomputed, so that it costs
// as little CPU as possible and the same for every target it serves.
//
//	POST /v1/chat/completions  a fixed chat.completion (about 300 B, with usage);
//	                           with "stream":true, SSE: 5 content chunks, a
//	                           finish chunk, a usage chunk when
//	                           stream_options.include_usage is true, and
//	                           "data: [DONE]", flushed event by event.
//	GET  /healthz              200 "ok" (readiness).
//
// The request body is always read to its end before answering: a server that
// answers before reading what a reverse proxy is still sending makes the
// proxy cut streams (golang/go#40747), which would measure the mock, not the
// proxy.
//
// The model "bench-sacp" is answered with a valid SACP object as the
// message content (the bench's SACP agent).
//
// A request for the model "bench-slow" gets its stream paced: one event every
// -slow-interval, so that many streams are open at the same time (sseload).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

const (
	completionJSON = `{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the mock upstream."},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`
	// sacpJSON answers the model "bench-sacp": a valid SACP object (the
	// bench's SACP agent requires data.answer, an integer) as the content.
	sacpJSON = `{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench-sacp",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":` +
		`"{\"thought\":\"Six times seven.\",\"status\":\"success\",\"data\":{\"answer\":42,\"unit\":\"none\"},\"message\":\"The answer is 42.\"}"},` +
		`"finish_reason":"stop"}],"usage":{"prompt_tokens":480,"completion_tokens":30,"total_tokens":510}}`
	chunkHead = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":`
)

var (
	jsonBody = []byte(completionJSON)
	// sseEvents are the events of a stream without the usage chunk;
	// usageEvent goes before the last one ([DONE]) when the client asked.
	sseEvents  [][]byte
	usageEvent = []byte(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}` + "\n\n")

	ctJSON   = []string{"application/json"}
	ctSSE    = []string{"text/event-stream"}
	noCache  = []string{"no-cache"}
	jsonLen  = []string{strconv.Itoa(len(completionJSON))}
	sacpBody = []byte(sacpJSON)
	sacpLen  = []string{strconv.Itoa(len(sacpJSON))}
	bodyPool = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 1024)) }}
)

func init() {
	words := []string{"Hello", " from", " the", " mock", " upstream."}
	for i, w := range words {
		delta := `{"content":"` + w + `"}`
		if i == 0 {
			delta = `{"role":"assistant","content":"` + w + `"}`
		}
		sseEvents = append(sseEvents, []byte(chunkHead+`[{"index":0,"delta":`+delta+`,"finish_reason":null}]}`+"\n\n"))
	}
	sseEvents = append(sseEvents, []byte(chunkHead+`[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"))
	sseEvents = append(sseEvents, []byte("data: [DONE]\n\n"))
}

type server struct {
	slowInterval time.Duration
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.chat(w, r)
	case r.URL.Path == "/healthz":
		w.Header()["Content-Type"] = []string{"text/plain"}
		io.WriteString(w, "ok\n")
	default:
		// Still drain the body: see the package comment.
		io.Copy(io.Discard, r.Body)
		http.Error(w, `{"error":{"message":"unknown path","type":"invalid_request_error","code":"unknown_url"}}`, http.StatusNotFound)
	}
}

func (s *server) chat(w http.ResponseWriter, r *http.Request) {
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bodyPool.Put(buf)
	if _, err := buf.ReadFrom(r.Body); err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	body := buf.Bytes()
	h := w.Header()
	if string(field(body, "model")) == `"bench-sacp"` && string(field(body, "stream")) != "true" {
		h["Content-Type"] = ctJSON
		h["Content-Length"] = sacpLen
		w.Write(sacpBody)
		return
	}
	if string(field(body, "stream")) != "true" {
		h["Content-Type"] = ctJSON
		h["Content-Length"] = jsonLen
		w.Write(jsonBody)
		return
	}
	includeUsage := string(field(body, "include_usage")) == "true"
	var pace time.Duration
	if string(field(body, "model")) == `"bench-slow"` {
		pace = s.slowInterval
	}
	h["Content-Type"] = ctSSE
	h["Cache-Control"] = noCache
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	var timer *time.Timer
	last := len(sseEvents) - 1
	for i, ev := range sseEvents {
		if i == last && includeUsage {
			if !s.send(w, fl, usageEvent) {
				return
			}
		}
		if pace > 0 && i > 0 {
			if timer == nil {
				timer = time.NewTimer(pace)
				defer timer.Stop()
			} else {
				timer.Reset(pace)
			}
			select {
			case <-timer.C:
			case <-r.Context().Done():
				return
			}
		}
		if !s.send(w, fl, ev) {
			return
		}
	}
}

func (s *server) send(w http.ResponseWriter, fl http.Flusher, ev []byte) bool {
	if _, err := w.Write(ev); err != nil {
		return false
	}
	if fl != nil {
		fl.Flush()
	}
	return true
}

// field returns the raw JSON value of the first occurrence of "key": in
// body, up to the next ',', '}' or ']' (enough for true/false and plain
// strings), or nil. It is a scan, not a parser: the mock must stay cheap.
func field(body []byte, key string) []byte {
	pat := make([]byte, 0, 32)
	pat = append(pat, '"')
	pat = append(pat, key...)
	pat = append(pat, '"')
	for off := 0; ; {
		i := bytes.Index(body[off:], pat)
		if i < 0 {
			return nil
		}
		j := off + i + len(pat)
		off = j
		for j < len(body) && isSpace(body[j]) {
			j++
		}
		if j >= len(body) || body[j] != ':' {
			continue // the key text appeared as a value
		}
		j++
		for j < len(body) && isSpace(body[j]) {
			j++
		}
		k := j
		for k < len(body) && body[k] != ',' && body[k] != '}' && body[k] != ']' {
			k++
		}
		return bytes.TrimRight(body[j:k], " \t\r\n")
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func main() {
	listen := flag.String("listen", "127.0.0.1:18081", "listen address")
	slow := flag.Duration("slow-interval", time.Second, `pause between the events of a "bench-slow" stream`)
	flag.Parse()
	srv := &http.Server{
		Addr:    *listen,
		Handler: &server{slowInterval: *slow},
		// No ReadHeaderTimeout: a proxy starved of CPU during the 10,000-stream
		// check may be slow to send a request on a fresh connection, and the
		// mock must not be the one to drop it.
		IdleTimeout: 120 * time.Second,
		ErrorLog:    log.New(os.Stderr, "upstream: ", log.LstdFlags),
	}
	fmt.Fprintf(os.Stderr, "upstream: listening on %s\n", *listen)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintf(os.Stderr, "upstream: %v\n", err)
		os.Exit(1)
	}
}
