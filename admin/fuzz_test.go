package admin

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzReadBody feeds arbitrary bytes to the admin API's JSON reader and
// the entry check behind it: never a panic; what is accepted is one JSON
// object of valid UTF-8 whose members are all known, and an accepted
// agent decodes to the entry it names.
func FuzzReadBody(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","type":"coder","rate_limit":"100/hour","max_request_size":"50KB"}`,
		`{"name":"a","rate_limt":"1/hour"}`,
		`{"name":"a","messages":[{"to":["b"],"actions":["x"]}],"embedding":[0.1,0.2]}`,
		`{"name":"a","type":"x","type":"y"}`,
		`{"name":"a","Type":"x"}`,
		`{"name":1}`, `[]`, `null`, `{"name":"a"} x`, "{\"name\":\"\xff\"}",
		`{"name":"a","budget":"25USD/day","token_limit":"1e3/hour"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := readBody(raw, agentFields, refuseFileOnly)
		if err != nil {
			return
		}
		if !utf8.Valid(raw) || !json.Valid(raw) {
			t.Fatalf("accepted %q: not valid UTF-8 JSON", raw)
		}
		for k := range b.Fields {
			if refuseFileOnly(k) != "" {
				t.Fatalf("accepted the file-only field %q", k)
			}
		}
		if b.Name == nil {
			return
		}
		a, err := agentOf(*b.Name, b.Fields, nil)
		if err == nil && a.ID != *b.Name {
			t.Fatalf("agent %q decoded as %q", *b.Name, a.ID)
		}
	})
}
