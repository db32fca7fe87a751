package a2a

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
)

// FuzzReadCall: whatever the reader accepts, the SDK's JSON-RPC binding
// (which reads the same bytes after it) reads as the same request: the
// message the checks saw is the message relayed, part for part.
func FuzzReadCall(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"},{"data":{"a":[1,{"b":null}]}}],"metadata":{"skill":"s"}}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"SendStreamingMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"url":"https://e/x","filename":"f.txt","mediaType":"text/plain"}]}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"t","historyLength":2}}`,
		`{"jsonrpc":"2.0","id":3,"method":"ListTasks","params":{"pageSize":3}}`,
		`{"jsonrpc":"2.0","id":4,"method":"message/send","params":{}}`,
		`{"jsonrpc":"2.0","id":5,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"aGk="}],"Parts":[]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, rerr := readCall(data, "")
		if rerr != nil {
			if c != nil {
				t.Fatal("a refusal with a call")
			}
			return
		}
		var env struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.NewDecoder(bytes.NewReader(data)).Decode(&env); err != nil {
			t.Fatalf("accepted what the SDK cannot read: %v", err)
		}
		if env.Method != c.method {
			t.Fatalf("method %q, the SDK reads %q", c.method, env.Method)
		}
		if c.send == nil {
			return
		}
		var theirs sdk.SendMessageRequest
		if err := json.Unmarshal(env.Params, &theirs); err != nil {
			t.Fatalf("accepted params the SDK cannot read: %v", err)
		}
		a, _ := json.Marshal(c.send)
		b, _ := json.Marshal(&theirs)
		if !bytes.Equal(a, b) {
			t.Fatalf("checked %s, relayed %s", a, b)
		}
		if len(c.send.Message.Parts) == 0 || c.send.Message.ID == "" {
			t.Fatalf("accepted a message without parts or id: %s", a)
		}
		for _, p := range c.send.Message.Parts {
			if p == nil || p.Content == nil {
				t.Fatalf("accepted a part without content: %s", a)
			}
		}
	})
}

func TestReadCallRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, body, version string
		code                int
		want                string
	}{
		{"0.3 method", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`, "", codeVersion, "A2A 0.3"},
		{"other version", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`, "0.3", codeVersion, `"0.3"`},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"Juggle","params":{}}`, "", codeNoMethod, "Juggle"},
		{"duplicate key", `{"jsonrpc":"2.0","id":1,"method":"GetTask","method":"CancelTask","params":{"id":"t"}}`, "", codeParse, "duplicate"},
		{"case variant", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a"}],"Parts":[{"text":"b"}]}}}`, "", codeParse, "Parts"},
		{"two kinds in a part", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a","url":"http://x"}]}}}`, "", codeParams, "exactly one"},
		{"0.3 part", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"kind":"file","file":{"bytes":"aGk="}}]}}}`, "", codeParams, "kind"},
		{"agent role", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"a"}]}}}`, "", codeParams, "ROLE_USER"},
		{"push config on send", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"configuration":{"pushNotificationConfig":{"url":"http://169.254.169.254/"}},"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a"}]}}}`, "", codeParams, "push"},
		{"skill not a string", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a"}],"metadata":{"skill":7}}}}`, "", codeParams, "skill"},
		{"task call without id", `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{}}`, "", codeParams, "id"},
		{"bad id", `{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask","params":{"id":"t"}}`, "", codeInvalid, "id"},
		{"unknown envelope member", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"},"extra":1}`, "", codeInvalid, "extra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readCall([]byte(tc.body), tc.version)
			if err == nil || err.code != tc.code || !strings.Contains(err.msg, tc.want) {
				t.Fatalf("err = %+v, want code %d with %q", err, tc.code, tc.want)
			}
		})
	}
}
