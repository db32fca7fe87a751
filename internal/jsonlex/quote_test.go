package jsonlex

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
)

// With lineSeparators, AppendQuoted writes what slog's JSON handler writes
// (the access log's format); either way its output reads back as the
// input, each invalid UTF-8 byte as U+FFFD.
func FuzzAppendQuoted(f *testing.F) {
	for _, s := range []string{"", "plain", `q " b \ `, "\n\r\t\x00\x1f\b\f", "<&>", "é 日本", "\xff\xfe", "\u2028\u2029"} {
		f.Add(s)
	}
	bare := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key != "s" {
			return slog.Attr{}
		}
		return a
	}
	f.Fuzz(func(t *testing.T, s string) {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: bare})).Info("", "s", s)
		want := bytes.TrimSuffix(bytes.TrimPrefix(buf.Bytes(), []byte(`{"s":`)), []byte("}\n"))
		if got := AppendQuoted(nil, s, true); !bytes.Equal(got, want) {
			t.Fatalf("%q: %s, slog %s", s, got, want)
		}
		raw := AppendQuoted(nil, s, false)
		var back string
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("%q: %s does not read back: %v", s, raw, err)
		}
		if back != string([]rune(s)) { // each invalid byte as U+FFFD
			t.Fatalf("%q read back as %q", s, back)
		}
	})
}
