package proxy

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sacpgw/gateway/scope"
)

const usageEvent = `data: {"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}` + "\n\n"

func filterAll(t *testing.T, in string, drop bool, chunkSize int) (string, *scope.Usage) {
	t.Helper()
	var got *scope.Usage
	var src io.Reader = strings.NewReader(in)
	if chunkSize > 0 {
		src = iotest.OneByteReader(src)
	}
	f := newSSEFilter(io.NopCloser(src), drop, func(u scope.Usage) { got = &u })
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), got
}

func TestSSEFilter(t *testing.T) {
	content := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n: keep-alive\ndata: {\"choices\":[{\"delta\":{\"content\":\"usage is a word\"}}]}\r\n\r\n"
	cases := []struct {
		note      string
		in        string
		drop      bool
		want      string
		wantUsage int
	}{
		{"pass through", content + "data: [DONE]\n\n", false, content + "data: [DONE]\n\n", 0},
		{"usage kept when asked", content + usageEvent + "data: [DONE]\n\n", false, content + usageEvent + "data: [DONE]\n\n", 7},
		{"usage dropped when added", content + usageEvent + "data: [DONE]\n\n", true, content + "data: [DONE]\n\n", 7},
		{"usage in a content chunk kept", `data: {"choices":[{"delta":{}}],"usage":{"total_tokens":9}}` + "\n\n", true, `data: {"choices":[{"delta":{}}],"usage":{"total_tokens":9}}` + "\n\n", 9},
		{"cut stream passes what arrived", "data: {\"a\":1}\n\ndata: {\"b\"", false, "data: {\"a\":1}\n\ndata: {\"b\"", 0},
		{"long line", "data: " + strings.Repeat("x", 40000) + "\n\n", false, "data: " + strings.Repeat("x", 40000) + "\n\n", 0},
		{"keep-alive comment loses its blank line", ": ping\n\ndata: {\"a\":1}\n\n: ping\r\n\r\n", false, ": ping\ndata: {\"a\":1}\n\n: ping\n", 0},
	}
	for _, tc := range cases {
		for _, chunked := range []int{0, 1} {
			out, u := filterAll(t, tc.in, tc.drop, chunked)
			if out != tc.want {
				t.Errorf("%s (chunked=%d): out = %q", tc.note, chunked, out)
			}
			if (u == nil) != (tc.wantUsage == 0) || (u != nil && u.TotalTokens != tc.wantUsage) {
				t.Errorf("%s: usage = %+v, want %d", tc.note, u, tc.wantUsage)
			}
		}
	}
}

// FuzzSSEFilter: without dropping, the filter is the identity on any byte
// stream without comment-only events; with dropping, it only ever removes
// whole usage-only events.
func FuzzSSEFilter(f *testing.F) {
	f.Add("data: {\"x\":1}\n\n" + usageEvent + "data: [DONE]\n\n")
	f.Add("data: {\"usage\":{}}\r\n\r\n")
	f.Add("\n\n\n")
	f.Add("data:" + strings.Repeat("y", 20000))
	f.Fuzz(func(t *testing.T, in string) {
		out, _ := filterAll(t, in, false, 0)
		// Only the blank line after a keep-alive comment may go.
		noEOL := strings.NewReplacer("\r", "", "\n", "")
		if len(out) > len(in) || noEOL.Replace(out) != noEOL.Replace(in) || (!strings.Contains(in, ":") && out != in) {
			t.Fatalf("identity broken: %q -> %q", in, out)
		}
		dropped, _ := filterAll(t, in, true, 1)
		if len(dropped) > len(in) {
			t.Fatalf("dropping added bytes")
		}
		if !strings.Contains(in, `"usage"`) && noEOL.Replace(dropped) != noEOL.Replace(in) {
			t.Fatalf("dropped an event without usage: %q -> %q", in, dropped)
		}
	})
}

func TestWithStreamUsage(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"model":"m","stream":true}`, `"stream_options":{"include_usage":true}`},
		{`{"model":"m","stream_options":{"include_usage":false}}`, `"stream_options":{"include_usage":true}`},
		{`{"model":"m","stream_options":null}`, `"stream_options":{"include_usage":true}`},
	}
	for _, tc := range cases {
		out, added := withStreamUsage([]byte(tc.in))
		if !added || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), `"model":"m"`) {
			t.Errorf("%s -> %s (added %v)", tc.in, out, added)
		}
	}
	in := `{"model":"m","stream_options":{"include_usage":true}}`
	if out, added := withStreamUsage([]byte(in)); added || string(out) != in {
		t.Errorf("client's own include_usage rewritten: %s %v", out, added)
	}
}
