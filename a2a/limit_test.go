package a2a

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAnswersBounded: an agent that answers without end makes the
// gateway's read fail past maxAnswer instead of growing its memory.
func TestAnswersBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := []byte(strings.Repeat("x", 1<<20))
		for i := 0; i < maxAnswer>>20+2; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	resp, err := boundedClient(srv.Client()).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if !errors.Is(err, errTooLarge) || n != maxAnswer {
		t.Fatalf("read %d bytes, err %v; want %d and errTooLarge", n, err, maxAnswer)
	}
}
