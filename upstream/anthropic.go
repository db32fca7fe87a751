package upstream

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sacpgw/gateway/dialect/anthropic"
	"github.com/sacpgw/gateway/upstream/internal/inproc"
)

// anthropicTransport is a native Anthropic upstream: it is asked in the
// neutral form, as every upstream is (POST {base}/chat/completions with
// an OpenAI Chat Completions body), and asks Anthropic's Messages API
// ({base}/messages) in its own form, so nothing is lost to a
// compatibility shim, then gives the answer back as a chat completion or
// chunk stream. Translation lives in package anthropic; this is the I/O.
//
// What cannot be translated is answered as an OpenAI-compatible provider
// answers it, a 400 in OpenAI's error shape, and reaches the agent as the
// provider's refusal; Anthropic's own errors keep their status (and
// Retry-After) with their message in OpenAI's shape.
type anthropicTransport struct {
	next    http.RoundTripper
	version string
	opts    anthropic.ProviderOptions
	now     func() time.Time
}

func newAnthropic(c Config) (http.RoundTripper, *url.URL, error) {
	rt, base, err := newHTTP(c)
	if err != nil {
		return nil, nil, err
	}
	version := c.AnthropicVersion
	if version == "" {
		version = "2023-06-01"
	}
	maxTokens := int64(c.DefaultMaxTokens)
	if maxTokens <= 0 {
		maxTokens = 4096
	}
	opts := anthropic.ProviderOptions{MaxTokens: maxTokens, PromptCache: c.PromptCache}
	return &anthropicTransport{next: rt, version: version, opts: opts, now: time.Now}, base, nil
}

// CloseIdleConnections releases the pooled connections of the transport
// underneath.
func (t *anthropicTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *anthropicTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/messages/count_tokens") {
		return t.countTokens(req)
	}
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/chat/completions") {
		name := req.URL.Path[strings.LastIndexByte(req.URL.Path, '/')+1:]
		return inproc.OpenAIError(req, http.StatusNotFound, "not_found_error", nil, nil, "The model's provider (Anthropic) has no "+name+" endpoint."), nil
	}
	chat, err := inproc.ReadBody(req)
	if err != nil {
		return nil, err
	}
	body, stream, includeUsage, err := anthropic.ProviderRequest(chat, t.opts)
	if err != nil {
		return inproc.OpenAIError(req, http.StatusBadRequest, "invalid_request_error", nil, nil, err.Error()), nil
	}
	out := req.Clone(req.Context())
	u := *req.URL
	u.Path = strings.TrimSuffix(u.Path, "/chat/completions") + "/messages"
	u.RawPath = ""
	out.URL = &u
	resp, err := t.send(out, body)
	if err != nil {
		return nil, err
	}
	created := t.now().Unix()
	switch {
	case resp.StatusCode != http.StatusOK:
		return t.errorAnswer(resp)
	case stream && mediaType(resp.Header.Get("Content-Type")) == "text/event-stream":
		resp.Header = answerHeader(resp.Header, "text/event-stream")
		resp.Body = anthropic.NewChunkReader(resp.Body, includeUsage, created)
		resp.ContentLength = -1
		return resp, nil
	}
	// A JSON answer (bounded: an answer is read into memory), translated.
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the provider's answer: %w", err)
	}
	if len(raw) > maxAnswer {
		return nil, fmt.Errorf("the provider's answer is over %d bytes", maxAnswer)
	}
	completion, err := anthropic.ProviderResponse(raw, created)
	if err != nil {
		// The provider's answer, not the agent's request: a gateway-side
		// failure, which the proxy reports as a 502.
		return inproc.OpenAIError(req, http.StatusBadGateway, "server_error", nil, nil, "The provider's (Anthropic) answer cannot be translated: "+err.Error()), nil
	}
	return replaced(resp, completion), nil
}

// send sends out with body as Anthropic's API takes it: its version
// header, JSON, and no header of OpenAI's.
func (t *anthropicTransport) send(out *http.Request, body []byte) (*http.Response, error) {
	out.Header.Del("Openai-Beta")
	out.Header.Set("Anthropic-Version", t.version)
	out.Header.Set("Content-Type", "application/json")
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	return t.next.RoundTrip(out)
}

// countTokens asks Anthropic to count a prompt: the neutral body (the
// gateway's count request, checked and redacted) said as a count_tokens
// request, translated as a message's prompt would be. Its answer passes
// as it came (the proxy reads it strictly); its errors are said in
// OpenAI's shape, as a message's are.
func (t *anthropicTransport) countTokens(req *http.Request) (*http.Response, error) {
	chat, err := inproc.ReadBody(req)
	if err != nil {
		return nil, err
	}
	body, err := anthropic.ProviderCountRequest(chat, t.opts)
	if err != nil {
		return inproc.OpenAIError(req, http.StatusBadRequest, "invalid_request_error", nil, nil, err.Error()), nil
	}
	out := req.Clone(req.Context())
	resp, err := t.send(out, body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return t.errorAnswer(resp)
	}
	resp.Header = answerHeader(resp.Header, mediaType(resp.Header.Get("Content-Type")))
	return resp, nil
}

// maxAnswer bounds a JSON answer read here, as the proxy bounds its own.
const maxAnswer = 64 << 20

// errorAnswer says the provider's error in OpenAI's shape, status and
// Retry-After kept (the proxy fails over or passes it on).
func (t *anthropicTransport) errorAnswer(resp *http.Response) (*http.Response, error) {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the provider's error: %w", err)
	}
	return replaced(resp, anthropic.ProviderError(resp.StatusCode, raw)), nil
}

// replaced is resp with a new JSON body.
func replaced(resp *http.Response, body []byte) *http.Response {
	resp.Header = answerHeader(resp.Header, "application/json")
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp
}

// answerHeader keeps what the proxy passes on of a provider's headers
// (Retry-After) under the translated body's type.
func answerHeader(h http.Header, contentType string) http.Header {
	out := http.Header{"Content-Type": {contentType}}
	if v := h.Get("Retry-After"); v != "" {
		out.Set("Retry-After", v)
	}
	return out
}

// mediaType is a Content-Type without its parameters.
func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}
