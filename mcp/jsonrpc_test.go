package mcp

import (
	"bytes"
	"errors"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// TestReadMessages: what the door takes, and what it refuses (a syntax
// problem is a parse error, a shape it does not know an invalid request).
func TestReadMessages(t *testing.T) {
	cases := []struct {
		note, in string
		want     string // "request", "notification", "response", "error", "parse", "invalid"; batches: one letter each
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "request"},
		{"request with a string id and params", `{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"x"}}`, "request"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "notification"},
		{"result", `{"jsonrpc":"2.0","id":7,"result":{}}`, "response"},
		{"error", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x","data":[1]}}`, "error"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"}]`, "rn"},
		{"not JSON", `{"jsonrpc":`, "parse"},
		{"a duplicate member", `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, "parse"},
		{"a duplicate member deep inside", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"a":1,"a":2}}}`, "parse"},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffing\"}", "parse"},
		{"trailing data", `{"jsonrpc":"2.0","id":1,"method":"ping"} {}`, "parse"},
		{"a case variant", `{"jsonrpc":"2.0","id":1,"Method":"ping"}`, "invalid"},
		{"an unknown member", `{"jsonrpc":"2.0","id":1,"method":"ping","extra":1}`, "invalid"},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, "invalid"},
		{"no version", `{"id":1,"method":"ping"}`, "invalid"},
		{"array params", `{"jsonrpc":"2.0","id":1,"method":"ping","params":[]}`, "invalid"},
		{"null params", `{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`, "invalid"},
		{"a fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, "invalid"},
		{"an object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, "invalid"},
		{"a null request id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, "invalid"},
		{"an empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, "invalid"},
		{"a method that is no string", `{"jsonrpc":"2.0","id":1,"method":1}`, "invalid"},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, "invalid"},
		{"neither", `{"jsonrpc":"2.0","id":1}`, "invalid"},
		{"a result that is no object", `{"jsonrpc":"2.0","id":1,"result":[]}`, "invalid"},
		{"an error without a code", `{"jsonrpc":"2.0","id":1,"error":{"message":"x"}}`, "invalid"},
		{"an error with more", `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x","stack":""}}`, "invalid"},
		{"a request with a result", `{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}`, "invalid"},
		{"an empty batch", `[]`, "invalid"},
		{"a string", `"ping"`, "invalid"},
		{"a batch of a batch", `[[{"jsonrpc":"2.0","id":1,"method":"ping"}]]`, "invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			msgs, batch, err := readMessages([]byte(tc.in))
			switch tc.want {
			case "parse", "invalid":
				if err == nil {
					t.Fatalf("accepted")
				}
				if got := errors.Is(err, errMalformed); got != (tc.want == "invalid") {
					t.Errorf("%v: malformed %v, want %s", err, got, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got string
			for _, m := range msgs {
				switch {
				case m.isRequest():
					got += "r"
				case m.isNotification():
					got += "n"
				case m.errObj != nil:
					got += "e"
				default:
					got += "s"
				}
			}
			want := map[string]string{"request": "r", "notification": "n", "response": "s", "error": "e"}[tc.want]
			if want == "" {
				want = tc.want
			}
			if got != want || batch != (tc.in[0] == '[') {
				t.Errorf("read %q (batch %v), want %q", got, batch, want)
			}
		})
	}
}

// TestBatchBound: a batch holds at most maxBatch messages.
func TestBatchBound(t *testing.T) {
	one := `{"jsonrpc":"2.0","method":"notifications/x"}`
	many := "[" + one + bytes.NewBufferString("").String()
	for range maxBatch {
		many += "," + one
	}
	if _, _, err := readMessages([]byte(many + "]")); !errors.Is(err, errMalformed) {
		t.Errorf("a batch of %d: %v", maxBatch+1, err)
	}
}

// TestEncodings: what the gateway writes reads back as the same message.
func TestEncodings(t *testing.T) {
	id := jsontext.Value(`"x"`)
	for _, b := range [][]byte{
		response(id, jsontext.Value(`{"a":1}`)),
		request(id, "tools/call", jsontext.Value(`{"name":"t"}`)),
		request(nil, "notifications/x", nil),
		errorResponse(nil, codeDenied, "no \"way\"", map[string]any{"escalation_id": "e1"}),
	} {
		msgs, _, err := readMessages(b)
		if err != nil || len(msgs) != 1 {
			t.Errorf("%s: %v", b, err)
		}
	}
}

// FuzzReadMessages: the reader never panics, and what it accepts is a
// message of one known kind whose re-encoding it accepts again.
func FuzzReadMessages(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,2,{"b":null}]}}}`,
		`[{"jsonrpc":"2.0","id":"a","result":{"content":[]}},{"jsonrpc":"2.0","method":"notifications/progress","params":{}}]`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, _, err := readMessages(data)
		if err != nil {
			return
		}
		for _, m := range msgs {
			var again []byte
			switch {
			case m.isRequest(), m.isNotification():
				again = request(m.id, m.method, m.params)
			case m.result != nil:
				again = response(m.id, m.result)
			case m.errObj != nil:
				again = withError(m.id, m.errObj)
			default:
				t.Fatalf("accepted a message of no kind: %q", m.raw)
			}
			if _, _, err := readMessages(again); err != nil {
				t.Fatalf("re-encoded %q does not read: %v", again, err)
			}
		}
	})
}
