// Command mcpserver is the benchmark's MCP server: a minimal Streamable
// HTTP server with one trivial tool, whose answers are precomputed so that
// it costs as little CPU as possible and the same for every target in
// front of it (bench/ratio.sh: the bare proxy and the gateway).
//
//	POST /mcp   JSON-RPC, answered as application/json:
//	            initialize       protocol 2025-06-18, a fresh Mcp-Session-Id
//	            notifications/*  202
//	            ping             {}
//	            tools/list       one tool, "echo" (readOnlyHint: true)
//	            tools/call       a fixed text result, isError false
//	            anything else    the JSON-RPC error -32601
//	GET  /mcp   405 (no server stream)
//	DELETE /mcp 204
//	GET /healthz 200 "ok" (readiness)
//
// The body is read to its end and only its id and method are decoded: the
// mock must stay cheap, its CPU is not what the bench compares.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

const (
	initResult = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":false}},` +
		`"serverInfo":{"name":"bench-mcp","version":"1"}}`
	listResult = `{"tools":[{"name":"echo","description":"Answers ok.",` +
		`"inputSchema":{"type":"object","properties":{"text":{"type":"string"}}},` +
		`"annotations":{"readOnlyHint":true}}]}`
	callResult = `{"content":[{"type":"text","text":"ok"}],"isError":false}`
)

var (
	ctJSON  = []string{"application/json"}
	outPool = sync.Pool{New: func() any { return new([]byte) }}
)

// message is what the mock reads of a JSON-RPC message.
type message struct {
	ID     jsontext.Value `json:"id"`
	Method string         `json:"method"`
}

type server struct{ sessions atomic.Int64 }

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/mcp" && r.Method == http.MethodPost:
		s.post(w, r)
	case r.URL.Path == "/mcp" && r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/mcp":
		w.Header().Set("Allow", "POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
	case r.URL.Path == "/healthz":
		w.Write([]byte("ok\n"))
	default:
		http.NotFound(w, r)
	}
}

func (s *server) post(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r.Body); err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var m message
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		http.Error(w, "not a JSON-RPC message: "+err.Error(), http.StatusBadRequest)
		return
	}
	if m.ID == nil {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	var result string
	switch m.Method {
	case "initialize":
		result = initResult
		w.Header().Set("Mcp-Session-Id", "bench-"+strconv.FormatInt(s.sessions.Add(1), 10))
	case "ping":
		result = "{}"
	case "tools/list":
		result = listResult
	case "tools/call":
		result = callResult
	}
	out := outPool.Get().(*[]byte)
	defer outPool.Put(out)
	b := append((*out)[:0], `{"jsonrpc":"2.0","id":`...)
	b = append(b, m.ID...)
	if result == "" {
		b = append(b, `,"error":{"code":-32601,"message":"method not found"}}`...)
	} else {
		b = append(b, `,"result":`...)
		b = append(b, result...)
		b = append(b, '}')
	}
	*out = b
	h := w.Header()
	h["Content-Type"] = ctJSON
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.Write(b)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18095", "listen address")
	flag.Parse()
	srv := &http.Server{
		Addr:              *listen,
		Handler:           &server{},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          log.New(os.Stderr, "mcpserver: ", log.LstdFlags),
	}
	fmt.Fprintf(os.Stderr, "mcpserver: listening on %s\n", *listen)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintf(os.Stderr, "mcpserver: %v\n", err)
		os.Exit(1)
	}
}
