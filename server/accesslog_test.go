package server

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
)

// stamp is the time field of a line; the two encoders stamp their own now.
var stamp = regexp.MustCompile(`^\{"time":"[^"]+",`)

// accessLine logs ex's access line through logger and returns it with the
// time field blanked.
func accessLine(t *testing.T, logger *slog.Logger, buf *bytes.Buffer, ex *scope.Exchange, status int, traceparent string) string {
	t.Helper()
	buf.Reset()
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{}`))
	if traceparent != "" {
		req.Header.Set("Traceparent", traceparent)
	}
	c := echo.New().NewContext(req, httptest.NewRecorder())
	c.Response().Status = status
	c.Response().Size = 1234
	(&Server{log: logger}).access(c, ex)
	line := buf.String()
	if line != "" && !stamp.MatchString(line) {
		t.Fatalf("no time field first: %s", line)
	}
	return stamp.ReplaceAllString(line, `{"time":"T",`)
}

// The pre-encoded access line is byte for byte what slog's JSON handler
// writes, for exchanges with every optional field and strings that need
// escaping.
func TestPreencodedAccessLineIsTheJSONHandlers(t *testing.T) {
	var fastBuf, slogBuf bytes.Buffer
	fast := NewJSONLogger(&fastBuf, &slog.HandlerOptions{Level: slog.LevelDebug})
	plain := slog.New(slog.NewJSONHandler(&slogBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if _, ok := fast.Handler().(*JSONHandler); !ok {
		t.Fatal("NewJSONLogger did not give the pre-encoding handler")
	}
	odd := []string{"plain", `quote " and \ backslash`, "tab\tnewline\nreturn\r", "ctl \x01\x1f", "<html> & 'x'",
		"é ü 日本", "bad utf8 \xff\xfe", "sep \u2028 \u2029", ""}
	r := rand.New(rand.NewPCG(3, 26))
	for i := range 300 {
		ex := &scope.Exchange{RequestID: odd[r.IntN(len(odd))], Start: time.Unix(0, 0)}
		if r.IntN(2) == 0 {
			ex.Agent = &roster.Agent{ID: odd[r.IntN(len(odd))]}
		}
		if r.IntN(2) == 0 {
			ex.Model, ex.Stream = odd[r.IntN(len(odd))], r.IntN(2) == 0
		}
		if r.IntN(2) == 0 {
			ex.Upstream = "openai"
		}
		if r.IntN(2) == 0 {
			ex.UsageKnown = true
			ex.Usage.PromptTokens, ex.Usage.CompletionTokens = r.IntN(1e6), r.IntN(1e3)
			ex.Usage.TotalTokens = ex.Usage.PromptTokens + ex.Usage.CompletionTokens
		}
		if r.IntN(2) == 0 {
			ex.Pace.First = ex.Start.Add(time.Duration(r.IntN(1e9)))
		}
		if r.IntN(2) == 0 {
			ex.SessionID = odd[r.IntN(len(odd))]
		}
		if r.IntN(3) == 0 {
			ex.ErrCode, ex.Err = "upstream_error", errors.New(odd[r.IntN(len(odd))])
		}
		status := []int{200, 403, 502}[r.IntN(3)]
		tp := ""
		if r.IntN(2) == 0 {
			tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		}
		got := accessLine(t, fast, &fastBuf, ex, status, tp)
		want := accessLine(t, plain, &slogBuf, ex, status, tp)
		// latency_ms differs by the time between the two calls.
		got, want = latency.ReplaceAllString(got, "L"), latency.ReplaceAllString(want, "L")
		if got != want {
			t.Fatalf("exchange %d:\npre-encoded %s\nslog        %s", i, got, want)
		}
	}
}

var latency = regexp.MustCompile(`"latency_ms":[0-9.e+-]+`)

// A logger with attributes added is not the access log's format: its
// lines go through slog, attributes included.
func TestAccessLineKeepsAddedAttributes(t *testing.T) {
	var buf bytes.Buffer
	logger := NewJSONLogger(&buf, nil).With("replica", "a")
	line := accessLine(t, logger, &buf, &scope.Exchange{RequestID: "r1", Start: time.Now()}, 200, "")
	if !strings.Contains(line, `"replica":"a"`) || !strings.Contains(line, `"request_id":"r1"`) {
		t.Errorf("line %s", line)
	}
}

func TestJSONFloatIsEncodingJSONs(t *testing.T) {
	for _, f := range []float64{0, 1, 0.001, 12.345, 1e-7, 3.5e21, 123456789.125, -2.5e-9} {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("", "f", f)
		want := regexp.MustCompile(`"f":([^}]+)}`).FindStringSubmatch(buf.String())[1]
		if got := string(appendJSONFloat(nil, f)); got != want {
			t.Errorf("%v: %s, want %s", f, got, want)
		}
	}
}

// BenchmarkAccessLine is one access line of a chat exchange, pre-encoded
// and through slog's JSON handler.
func BenchmarkAccessLine(b *testing.B) {
	ex := &scope.Exchange{RequestID: "0123456789abcdef", Start: time.Now(), Agent: &roster.Agent{ID: "bench"},
		Model: "gpt-4o-mini", Upstream: "openai", UsageKnown: true}
	ex.Usage.PromptTokens, ex.Usage.CompletionTokens, ex.Usage.TotalTokens = 12, 30, 42
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{}`))
	for name, logger := range map[string]*slog.Logger{
		"preencoded": NewJSONLogger(io.Discard, nil),
		"slog":       slog.New(slog.NewJSONHandler(io.Discard, nil)),
	} {
		b.Run(name, func(b *testing.B) {
			c := echo.New().NewContext(req, httptest.NewRecorder())
			c.Response().Status = 200
			s := &Server{log: logger}
			b.ReportAllocs()
			for range b.N {
				s.access(c, ex)
			}
		})
	}
}
