package upstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/sacpgw/gateway/config"
)

// mockBase is the API root of the built-in mock; it is never dialled.
const mockBase = "http://mock.invalid/v1"

// protocolMarker is how the mock recognises an injected SACP protocol prompt,
// so that the quickstart's protocol agent gets a valid SACP answer.
const protocolMarker = "SYSTEM PROTOCOL: RESPONSE FORMAT"

// mock is a deterministic OpenAI-compatible provider that answers in
// process: the same request always gets the same answer, with no network
// and no key, streaming included. It serves demos, the quickstart and tests.
type mock struct{}

func newMock(config.Upstream) (http.RoundTripper, *url.URL, error) {
	base, _ := url.Parse(mockBase)
	return mock{}, base, nil
}

type mockRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Input      json.RawMessage `json:"input"`
	Dimensions *int            `json:"dimensions"`
}

func (m mock) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	p := req.URL.Path
	switch {
	case req.Method == http.MethodPost && strings.HasSuffix(p, "/chat/completions"):
		return m.chat(req, body), nil
	case req.Method == http.MethodPost && strings.HasSuffix(p, "/embeddings"):
		return m.embeddings(req, body), nil
	default:
		return mockResponse(req, http.StatusNotFound, "application/json",
			[]byte(`{"error":{"message":"mock: unknown endpoint","type":"invalid_request_error","code":"not_found","param":null}}`)), nil
	}
}

func (m mock) chat(req *http.Request, body []byte) *http.Response {
	var in mockRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return mockResponse(req, http.StatusBadRequest, "application/json",
			[]byte(`{"error":{"message":"mock: malformed JSON","type":"invalid_request_error","code":"invalid_request","param":null}}`))
	}
	var system, user string
	promptChars := 0
	for _, msg := range in.Messages {
		text := contentText(msg.Content)
		promptChars += len(text)
		switch msg.Role {
		case "system", "developer":
			system += text
		case "user":
			user = text
		}
	}
	content := "This is a deterministic mock answer to: " + clip(user, 200)
	if strings.Contains(system, protocolMarker) {
		obj := map[string]any{
			"thought": "Mock provider: answering deterministically in the SACP format.",
			"status":  "success",
			"data":    map[string]any{"echo": clip(user, 200), "words": len(strings.Fields(user))},
			"message": "Mock answer to: " + clip(user, 200),
		}
		b, _ := json.Marshal(obj)
		content = string(b)
	}
	sum := sha256.Sum256(body)
	id := "chatcmpl-mock-" + hex.EncodeToString(sum[:6])
	usage := map[string]int{"prompt_tokens": tokens(promptChars), "completion_tokens": tokens(len(content))}
	usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
	const created = 1700000000
	if !in.Stream {
		out, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": in.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": content}}},
			"usage": usage,
		})
		return mockResponse(req, http.StatusOK, "application/json", out)
	}
	var buf bytes.Buffer
	chunk := func(delta map[string]any, finish any, u any) {
		choices := []any{}
		if delta != nil {
			choices = append(choices, map[string]any{"index": 0, "delta": delta, "finish_reason": finish})
		}
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": in.Model, "choices": choices}
		if u != nil {
			c["usage"] = u
		}
		b, _ := json.Marshal(c)
		buf.WriteString("data: ")
		buf.Write(b)
		buf.WriteString("\n\n")
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	for _, piece := range splitWords(content, 3) {
		chunk(map[string]any{"content": piece}, nil, nil)
	}
	chunk(map[string]any{}, "stop", nil)
	if in.StreamOptions != nil && in.StreamOptions.IncludeUsage {
		chunk(nil, nil, usage)
	}
	buf.WriteString("data: [DONE]\n\n")
	return mockResponse(req, http.StatusOK, "text/event-stream", buf.Bytes())
}

func (m mock) embeddings(req *http.Request, body []byte) *http.Response {
	bad := func(msg, param string) *http.Response {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "mock: " + msg, "type": "invalid_request_error", "code": "invalid_request", "param": param}})
		return mockResponse(req, http.StatusBadRequest, "application/json", b)
	}
	var in mockRequest
	if err := json.Unmarshal(body, &in); err != nil || len(in.Input) == 0 {
		return bad("want model and input", "input")
	}
	// input is a string or an array of strings, as OpenAI's; token arrays
	// are not understood, and are refused rather than embedded as "".
	var inputs []string
	if err := json.Unmarshal(in.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(in.Input, &one); err != nil {
			return bad("input must be a string or an array of strings", "input")
		}
		inputs = []string{one}
	}
	if len(inputs) == 0 {
		return bad("input must not be empty", "input")
	}
	dim := MockEmbeddingDim
	if in.Dimensions != nil {
		if *in.Dimensions < 1 || *in.Dimensions > maxMockDim {
			return bad(fmt.Sprintf("dimensions must be from 1 to %d", maxMockDim), "dimensions")
		}
		dim = *in.Dimensions
	}
	data := make([]any, len(inputs))
	chars := 0
	for i, s := range inputs {
		chars += len(s)
		vec := mockEmbedding(s, dim)
		for j, x := range vec {
			// Six decimals keep the answer short; the vector stays
			// normalised to within 1e-5.
			vec[j] = math.Round(x*1e6) / 1e6
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": vec}
	}
	out, _ := json.Marshal(map[string]any{
		"object": "list", "data": data, "model": in.Model,
		"usage": map[string]int{"prompt_tokens": tokens(chars), "total_tokens": tokens(chars)},
	})
	return mockResponse(req, http.StatusOK, "application/json", out)
}

// MockEmbeddingDim is the length of the mock's embeddings when the request
// sets no "dimensions". 256, not fewer: an agent's profile has a hundred
// features or more, and in 64 buckets their collisions drown the signal
// (measured: 64 dimensions ranked a short query's agent second).
const MockEmbeddingDim = 256

// maxMockDim bounds "dimensions" (OpenAI's largest model has 3072).
const maxMockDim = 4096

// MockEmbedding is the mock provider's embedding of text with
// MockEmbeddingDim dimensions (unrounded), for tests that need the vectors
// the mock answers without going through it.
func MockEmbedding(text string) []float64 { return mockEmbedding(text, MockEmbeddingDim) }

// mockEmbedding is a hashed bag of features, L2-normalised, so that texts
// sharing words, or parts of words ("hotel", "hotels"), are near and others
// are not, with no model: the same text always gets the same vector.
//
// Words are the maximal runs of letters and digits of the lowercased text.
// Each word is a feature of weight 1 ("w:" + word), and so is each character
// trigram of the word padded with one space on either side (" ho", "hot",
// ..., "ls "; "c:" + trigram). A feature adds its weight
// to bucket FNV-1a-64(feature) mod dim, negated when the hash's top bit is
// set: signed hashing, so that collisions cancel out on average instead of
// making unrelated texts look alike. A text without letters or digits gets
// the zero vector.
func mockEmbedding(text string, dim int) []float64 {
	vec := make([]float64, dim)
	add := func(feature string, w float64) {
		h := fnv.New64a()
		h.Write([]byte(feature))
		sum := h.Sum64()
		if sum>>63 == 1 {
			w = -w
		}
		vec[sum%uint64(dim)] += w
	}
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for _, w := range words {
		add("w:"+w, 1)
		padded := []rune(" " + w + " ")
		for i := 0; i+3 <= len(padded); i++ {
			add("c:"+string(padded[i:i+3]), 1)
		}
	}
	var norm float64
	for _, x := range vec {
		norm += x * x
	}
	if norm == 0 {
		return vec
	}
	norm = math.Sqrt(norm)
	for i := range vec {
		vec[i] /= norm
	}
	return vec
}

func mockResponse(req *http.Request, status int, ctype string, body []byte) *http.Response {
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

// contentText flattens a message content (a string or an array of parts).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func tokens(chars int) int { return (chars + 3) / 4 }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}

// splitWords cuts s into pieces of n words, keeping the spaces, so that the
// concatenated pieces are exactly s.
func splitWords(s string, n int) []string {
	var out []string
	words, start := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			words++
			if words%n == 0 {
				out = append(out, s[start:i+1])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
