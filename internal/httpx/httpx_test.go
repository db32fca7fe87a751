package httpx

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/scope"
)

// Every front door answers errors in OpenAI's shape and records the code
// on the Exchange for the access log and the audit entry.
func TestFailWritesOpenAIShapeAndRecordsIt(t *testing.T) {
	ex := &scope.Exchange{}
	r := scope.Attach(httptest.NewRequest(http.MethodPost, "/v1/x", nil), ex)
	w := httptest.NewRecorder()
	Fail(w, r, apierror.Forbidden("Denied by policy: no."))
	var body struct {
		Error struct {
			Message, Type, Code string
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	if w.Code != http.StatusForbidden || body.Error.Message != "Denied by policy: no." || body.Error.Code == "" || ex.Status != http.StatusForbidden || ex.ErrCode != body.Error.Code {
		t.Fatalf("status %d body %+v exchange %d %q", w.Code, body, ex.Status, ex.ErrCode)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
}

// countingReader counts what was read of a body.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReadLimited(t *testing.T) {
	tests := []struct {
		name          string
		body          string
		contentLength int64 // -1: unknown (chunked)
		limit         int64
		status        int // 0: read
		maxRead       int
	}{
		{"within the limit", `{"a":1}`, 7, 10, 0, 7},
		{"exactly the limit", `0123456789`, 10, 10, 0, 10},
		{"declared too large: nothing read", strings.Repeat("x", 100), 100, 10, http.StatusRequestEntityTooLarge, 0},
		{"chunked, too large: stops after limit+1", strings.Repeat("x", 100000), -1, 10, http.StatusRequestEntityTooLarge, 11},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cr := &countingReader{r: strings.NewReader(tc.body)}
			r := httptest.NewRequest(http.MethodPost, "/", cr)
			r.ContentLength = tc.contentLength
			got, err := ReadLimited(r, tc.limit)
			if tc.status == 0 {
				if err != nil || string(got) != tc.body {
					t.Fatalf("got %q, %v", got, err)
				}
			} else {
				var ae *apierror.Error
				if !errors.As(err, &ae) || ae.Status != tc.status {
					t.Fatalf("err %v, want status %d", err, tc.status)
				}
			}
			if cr.n > tc.maxRead {
				t.Errorf("read %d bytes, at most %d wanted", cr.n, tc.maxRead)
			}
		})
	}
}

// A body of the declared length is read into one allocation of its size:
// every chat request passes here.
func TestReadLimitedAllocatesTheBodyOnce(t *testing.T) {
	body := strings.Repeat("x", 300)
	allocs := testing.AllocsPerRun(100, func() {
		r := &http.Request{Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}
		if got, err := ReadLimited(r, 1<<20); err != nil || len(got) != len(body) {
			t.Fatalf("got %d bytes, %v", len(got), err)
		}
	})
	// The buffer, the limit reader, the request and its body reader.
	if allocs > 4 {
		t.Errorf("%v allocations per read", allocs)
	}
}
