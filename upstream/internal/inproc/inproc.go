// Package inproc builds the answers of the transports that answer in
// process, without a network: the built-in mock provider and the
// Anthropic translation's own errors. Both speak as an OpenAI-compatible
// provider would, so they share one way of making a response.
package inproc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Response is a complete answer to req with the given status, Content-Type
// and body.
func Response(req *http.Request, status int, ctype string, body []byte) *http.Response {
	h := http.Header{}
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		Request: req,
	}
}

// OpenAIError is an answer made here, as an OpenAI-compatible provider
// would answer (a nil code or param is null).
func OpenAIError(req *http.Request, status int, typ string, code, param any, message string) *http.Response {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ, "code": code, "param": param}})
	return Response(req, status, "application/json", b)
}

// ReadBody reads and closes a request's body.
func ReadBody(req *http.Request) ([]byte, error) {
	if req.Body == nil {
		return nil, nil
	}
	defer req.Body.Close()
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the request: %w", err)
	}
	return b, nil
}
