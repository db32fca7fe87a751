package proxy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// A client that did not ask for stream usage sees the stream it would have
// seen had the gateway not asked: no "usage" member anywhere, not the null
// OpenAI puts in every chunk once usage is asked for, nor the usage a
// provider puts in its last chunk beside the choices. The usage is still
// read for the books. A client that asked gets every byte as before.
func TestSSEFilterHidesUsageNotAskedFor(t *testing.T) {
	const (
		role    = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]`
		content = `{"id":"c","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]`
		finish  = `{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]`
		usage   = `{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}`
	)
	cases := []struct {
		note, in, hidden string
	}{
		{"usage null in every chunk, usage chunk last",
			"data: " + role + `,"usage":null}` + "\n\n" + "data: " + content + `,"usage":null}` + "\n\n" +
				"data: " + finish + `,"usage":null}` + "\n\n" + usageEvent + "data: [DONE]\n\n",
			"data: " + role + "}\n\ndata: " + content + "}\n\ndata: " + finish + "}\n\ndata: [DONE]\n\n"},
		{"usage beside the last choices",
			"data: " + content + `,"usage":null}` + "\n\n" + "data: " + finish + `,"usage":` + usage + "}\n\ndata: [DONE]\n\n",
			"data: " + content + "}\n\ndata: " + finish + "}\n\ndata: [DONE]\n\n"},
		{"usage first, spaces and an escaped name",
			"data: " + `{ "us\u0061ge" : null , "id":"c","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n" +
				"data: " + `{"id":"c",` + "\t" + ` "usage":` + usage + ` ,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}] }` + "\n\ndata: [DONE]\n\n",
			"data: " + `{ "id":"c","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n" +
				"data: " + `{"id":"c" ,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}] }` + "\n\ndata: [DONE]\n\n"},
		{"only usage beside the choices", "data: " + `{"usage":` + usage + `,"choices":[]}` + "\n\ndata: [DONE]\n\n", "data: [DONE]\n\n"},
	}
	for _, tc := range cases {
		for _, oneByte := range []bool{false, true} {
			out, u, refused := filterAll(t, tc.in, true, oneByte, nil)
			if out != tc.hidden || refused != "" {
				t.Errorf("%s, not asked (one byte %v): out = %q (refused %q)\nwant %q", tc.note, oneByte, out, refused, tc.hidden)
			}
			if strings.Contains(out, "usage") {
				t.Errorf("%s: a client that did not ask got a usage member: %q", tc.note, out)
			}
			if u == nil || u.TotalTokens != 7 {
				t.Errorf("%s, not asked: usage for the books = %+v, want 7 tokens", tc.note, u)
			}
			out, u, refused = filterAll(t, tc.in, false, oneByte, nil)
			if out != tc.in || refused != "" {
				t.Errorf("%s, asked (one byte %v): out = %q (refused %q)\nwant %q", tc.note, oneByte, out, refused, tc.in)
			}
			if u == nil || u.TotalTokens != 7 {
				t.Errorf("%s, asked: usage for the books = %+v, want 7 tokens", tc.note, u)
			}
		}
	}
}

// withoutMember cuts the member out of any object and leaves valid JSON
// that is the object less that member, nothing else changed.
func FuzzWithoutMember(f *testing.F) {
	for _, s := range []string{`{"usage":null}`, `{"a":1,"usage":{"x":[1,2]},"b":"c"}`, `{ "us\u0061ge" : 1 , "b" : 2 }`,
		`{"b":2 , "usage":3 }`, `{}`, `{"a":{"usage":1}}`, `[1]`, `{"usage":1,"usage":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var in map[string]any
		if json.Unmarshal(data, &in) != nil {
			return
		}
		out, err := withoutMember(data, "usage")
		if err != nil {
			return // duplicate names and the like: the strict reading refuses those first
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("withoutMember(%s) = %s: not JSON: %v", data, out, err)
		}
		delete(in, "usage")
		if !reflect.DeepEqual(got, in) {
			t.Fatalf("withoutMember(%s) = %s", data, out)
		}
	})
}
