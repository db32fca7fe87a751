// Package httpx holds the HTTP pieces every front door shares (the
// OpenAI-compatible pipeline, the approval protocol, agent messaging):
// errors in OpenAI's shape, JSON answers and size-limited body reading.
// The front doors import it and none of each other.
package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/scope"
)

// WriteJSON answers v as JSON with status. v is the gateway's own value, so
// an encoding failure is the gateway's bug: a 500 in OpenAI's shape.
func WriteJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		Fail(w, r, fmt.Errorf("encode response: %w", err))
		return
	}
	WriteRawJSON(w, status, append(b, '\n'))
}

// WriteRawJSON answers b, a JSON document the caller has checked or built,
// with status and its length.
func WriteRawJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Fail writes err in OpenAI's error shape and records it on the Exchange.
func Fail(w http.ResponseWriter, r *http.Request, err error) {
	e := apierror.Write(w, err)
	if ex := scope.Lookup(r.Context()); ex != nil {
		ex.ErrCode = e.Code
		ex.Status = e.Status
		if e.Err != nil {
			ex.Err = e.Err
		}
	}
}

// ReadLimited reads at most limit bytes (an agent's max_request_size); a
// larger body is a 413 without reading the rest (the declared
// Content-Length is refused up front). Every front door that reads an
// agent's body uses it.
func ReadLimited(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, apierror.TooLarge(limit)
	}
	if r.Body == nil {
		return nil, apierror.BadRequest("", "We could not parse the JSON body of your request: the body is empty.")
	}
	size := 512
	if r.ContentLength > 0 {
		size = int(r.ContentLength)
	}
	// One allocation for a body of the declared length: the byte beyond it
	// leaves room for the read that finds the end (bytes.Buffer.ReadFrom
	// wants 512 free bytes per read, and copied every small body once).
	body, err := readAll(io.LimitReader(r.Body, limit+1), make([]byte, 0, size+1))
	n := int64(len(body))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The server's body idle deadline: the client stopped sending.
		return nil, &apierror.Error{Status: http.StatusRequestTimeout, Type: apierror.TypeInvalidRequest, Code: "request_timeout",
			Message: "The request body stopped arriving; send it without pauses."}
	}
	if err != nil {
		return nil, apierror.BadRequest("", "We could not read the body of your request: %v", err)
	}
	if n > limit {
		return nil, apierror.TooLarge(limit)
	}
	return body, nil
}

// readAll is io.ReadAll into buf, which grows only when full.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// SameOrigin refuses a state-changing request from a browser whose Origin
// (or, without one, Referer) names another site. Browsers send Origin on
// every POST; a request with neither is not from a browser form and may
// proceed (a session cookie still needs its CSRF token).
func SameOrigin(r *http.Request) bool {
	src := r.Header.Get("Origin")
	if src == "" {
		src = r.Header.Get("Referer")
	}
	if src == "" {
		return true
	}
	u, err := url.Parse(src)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}
