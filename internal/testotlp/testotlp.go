// Package testotlp is an OpenTelemetry logs receiver for tests: the
// OpenTelemetry Collector's own OTLP protocol packages (pdata plogotlp)
// decode what arrives, over OTLP/HTTP (protobuf) and OTLP/gRPC, so a test
// sees the records as a real collector would. Imported by tests only.
package testotlp

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Record is one log record received, with what came with its export.
type Record struct {
	Body           string
	Time           time.Time
	EventName      string
	SeverityNumber int32
	SeverityText   string
	Attributes     map[string]any
	Resource       map[string]any
	Scope          string
	// Header is the export's HTTP headers, or its gRPC metadata (names
	// canonicalized).
	Header http.Header
}

// Collector receives OTLP logs on an HTTP and a gRPC listener, both on
// loopback, until the test ends.
type Collector struct {
	// URL is the OTLP/HTTP base URL (records are posted to URL/v1/logs);
	// GRPC the gRPC endpoint as a URL (http://127.0.0.1:port).
	URL, GRPC string

	down    atomic.Int32 // an HTTP status (or its gRPC code's) to answer with; 0: accept
	mu      sync.Mutex
	got     []Record
	exports int
	http    *httptest.Server
	grpc    *grpc.Server
}

// New starts a collector.
func New(t testing.TB) *Collector {
	c := &Collector{}
	c.http = httptest.NewServer(http.HandlerFunc(c.serveHTTP))
	c.URL = c.http.URL
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.grpc = grpc.NewServer()
	plogotlp.RegisterGRPCServer(c.grpc, &grpcLogs{c: c})
	go func() { _ = c.grpc.Serve(ln) }()
	c.GRPC = "http://" + ln.Addr().String()
	t.Cleanup(func() {
		c.http.Close()
		c.grpc.Stop()
	})
	return c
}

// Refuse makes every export fail with status (503: down, 401: a wrong
// key…) until Refuse(0).
func (c *Collector) Refuse(status int) { c.down.Store(int32(status)) }

// Records returns what was received so far, in order.
func (c *Collector) Records() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Record(nil), c.got...)
}

// Exports counts the exports accepted.
func (c *Collector) Exports() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exports
}

// WaitFor waits until done is true of the records received, failing the
// test after timeout; it returns the records.
func (c *Collector) WaitFor(t testing.TB, timeout time.Duration, done func([]Record) bool) []Record {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rs := c.Records()
		if done(rs) {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector has %d records, not what the test waits for", len(rs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *Collector) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/logs" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a POST of application/x-protobuf to /v1/logs", http.StatusBadRequest)
		return
	}
	if s := c.down.Load(); s != 0 {
		http.Error(w, "refused by the test; your header was "+r.Header.Get("Authorization"), int(s))
		return
	}
	body, err := io.ReadAll(r.Body)
	req := plogotlp.NewExportRequest()
	if err == nil {
		err = req.UnmarshalProto(body)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.add(req.Logs(), r.Header.Clone())
	out, _ := plogotlp.NewExportResponse().MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

type grpcLogs struct {
	plogotlp.UnimplementedGRPCServer
	c *Collector
}

func (g *grpcLogs) Export(ctx context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	if s := g.c.down.Load(); s != 0 {
		code := codes.Unavailable
		if s == http.StatusUnauthorized {
			code = codes.Unauthenticated
		}
		return plogotlp.NewExportResponse(), status.Error(code, "refused by the test")
	}
	h := http.Header{}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, vs := range md {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	g.c.add(req.Logs(), h)
	return plogotlp.NewExportResponse(), nil
}

func (c *Collector) add(logs plog.Logs, h http.Header) {
	var out []Record
	for _, rl := range logs.ResourceLogs().All() {
		res := rl.Resource().Attributes().AsRaw()
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				body := lr.Body().AsString()
				if lr.Body().Type() == pcommon.ValueTypeBytes {
					body = string(lr.Body().Bytes().AsRaw())
				}
				out = append(out, Record{
					Body: body, Time: lr.Timestamp().AsTime(), EventName: lr.EventName(),
					SeverityNumber: int32(lr.SeverityNumber()), SeverityText: lr.SeverityText(),
					Attributes: lr.Attributes().AsRaw(), Resource: res, Scope: sl.Scope().Name(), Header: h,
				})
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, out...)
	c.exports++
}

// BySeq indexes records by their gateway.audit.seq attribute and counts
// the seqs received more than once.
func BySeq(rs []Record) (bySeq map[int64]Record, dups int) {
	bySeq = map[int64]Record{}
	for _, r := range rs {
		seq, _ := r.Attributes["gateway.audit.seq"].(int64)
		if _, ok := bySeq[seq]; ok {
			dups++
		}
		bySeq[seq] = r
	}
	return bySeq, dups
}

// HeaderValues lists the values of a header across the records' exports.
func HeaderValues(rs []Record, name string) []string {
	var out []string
	for _, r := range rs {
		out = append(out, strings.Join(r.Header.Values(name), ","))
	}
	return out
}
