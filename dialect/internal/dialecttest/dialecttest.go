// Package dialecttest holds the test helpers the dialect packages share:
// their testdata, JSON comparison, the OpenAI chunk stream they read, and
// the harness that feeds a stream translator its input in random slices.
// It is imported by tests only.
package dialecttest

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// NewStream is a dialect's stream translator constructor.
type NewStream func(w io.Writer, model string) io.WriteCloser

// ReadFile reads testdata/name.
func ReadFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Seeds adds the files of testdata matching pattern to f's corpus.
func Seeds(f *testing.F, pattern string, skip func(string) bool) {
	names, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil || len(names) == 0 {
		f.Fatalf("no seeds %s: %v", pattern, err)
	}
	for _, name := range names {
		if skip != nil && skip(name) {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// SameJSON compares two JSON documents as values (key order and spacing
// aside) and shows both, indented, when they differ.
func SameJSON(t testing.TB, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want is not JSON: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON differs\n got: %s\nwant: %s", Indent(got), Indent(want))
	}
}

// Indent is b indented, or b when it is not JSON.
func Indent(b []byte) string {
	v := jsontext.Value(bytes.Clone(b))
	if err := v.Indent(); err != nil {
		return string(b)
	}
	return string(v)
}

// Feed writes in to a new stream in slices of random sizes (mostly small,
// sometimes large, sometimes empty) and closes it.
func Feed(t testing.TB, newStream NewStream, model string, in []byte, rng *rand.Rand) []byte {
	t.Helper()
	var out bytes.Buffer
	s := newStream(&out, model)
	for len(in) > 0 {
		n := rng.IntN(8)
		switch rng.IntN(10) {
		case 0:
			n = 0
		case 1:
			n = rng.IntN(len(in) + 1)
		}
		n = min(n, len(in))
		if k, err := s.Write(in[:n]); err != nil || k != n {
			t.Fatalf("Write = %d, %v; want %d, nil", k, err, n)
		}
		in = in[n:]
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return out.Bytes()
}

// FeedWhole writes in in one slice and closes the stream.
func FeedWhole(t testing.TB, newStream NewStream, model string, in []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	s := newStream(&out, model)
	if _, err := s.Write(in); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// StreamFixture translates in and compares with want byte for byte: whole
// (then check holds the output to the dialect's protocol), byte by byte,
// in random slices, and with CRLF and CR line ends.
func StreamFixture(t *testing.T, newStream NewStream, model string, in, want []byte, check func(t testing.TB, out []byte)) {
	t.Helper()
	got := FeedWhole(t, newStream, model, in)
	if !bytes.Equal(got, want) {
		t.Fatalf("whole input:\n got:\n%s\nwant:\n%s", got, want)
	}
	check(t, got)

	var out bytes.Buffer
	s := newStream(&out, model)
	for i := range in {
		if _, err := s.Write(in[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("byte by byte:\n%s", out.Bytes())
	}

	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		if got := Feed(t, newStream, model, in, rng); !bytes.Equal(got, want) {
			t.Fatalf("seed %d:\n%s", seed, got)
		}
	}

	for _, eol := range []string{"\r\n", "\r"} {
		in := bytes.ReplaceAll(in, []byte("\n"), []byte(eol))
		if got := FeedWhole(t, newStream, model, in); !bytes.Equal(got, want) {
			t.Fatalf("line ends %q:\n%s", eol, got)
		}
		for seed := range uint64(50) {
			if got := Feed(t, newStream, model, in, rand.New(rand.NewPCG(seed, 2))); !bytes.Equal(got, want) {
				t.Fatalf("line ends %q, seed %d:\n%s", eol, seed, got)
			}
		}
	}
}

// Chunk is an OpenAI stream chunk event with the given choices and usage.
func Chunk(choices, usage string) string {
	s := `data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[` + choices + `]`
	if usage != "" {
		s += `,"usage":` + usage
	}
	return s + "}\n\n"
}

// Text is a choice whose delta is the text s.
func Text(s string) string {
	return `{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}`
}

// Finish is a choice that finishes for reason.
func Finish(reason string) string {
	return `{"index":0,"delta":{},"finish_reason":"` + reason + `"}`
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("client gone")
}

// WriterError checks that the client's failure reaches the caller, once
// per call, and nothing more is written: first and next are the chunks
// written.
func WriterError(t *testing.T, newStream NewStream, first, next string) {
	t.Helper()
	w := &failWriter{}
	s := newStream(w, "m")
	if _, err := s.Write([]byte(first)); err == nil {
		t.Fatal("no error from a failing writer")
	}
	if _, err := s.Write([]byte(next)); err == nil {
		t.Fatal("no error on the next Write")
	}
	if err := s.Close(); err == nil {
		t.Fatal("no error from Close")
	}
	if w.n != 1 {
		t.Errorf("%d writes to a failed writer", w.n)
	}
}
