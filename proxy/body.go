package proxy

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	sj "github.com/sacpgw/gateway/internal/strictjson"
	"github.com/sacpgw/gateway/policy"
)

// Kind is the OpenAI operation a chain serves.
type Kind int

// The operations with a request body.
const (
	KindChat Kind = iota
	KindEmbeddings
)

// Request is the part of an OpenAI request body the gateway acts on; the
// body itself is forwarded as received (plus the gateway's own edits).
type Request struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	Stream   bool      `json:"stream"`
	// StreamOptions is nil when the client sent none.
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// Input is the embeddings input.
	Input jsontext.Value `json:"input"`
	// MaxTokens and MaxCompletionTokens bound the completion (the token
	// budget reserves them before the call).
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	// N is the number of choices asked (nil: one).
	N *int `json:"n"`
}

// Message is one chat message; Content stays raw (a string or parts).
type Message struct {
	Role    string         `json:"role"`
	Content jsontext.Value `json:"content"`
}

// ReadBody is the stage that reads the request body through the agent's
// max_request_size (never buffering more than that), checks that it is
// valid UTF-8 JSON with the fields the operation needs, and records the
// model, the stream flag and a prompt-size estimate on the Exchange.
func ReadBody(kind Kind) Stage { return readBody(kind, nil) }

// readBody is ReadBody that, for an agent whose chat policy reads the
// request (reads), builds the policy's value of the body in the strict
// reading's own pass (ex.BodyValue): one parse for the reader and the
// policy.
func readBody(kind Kind, reads func(*roster.Agent) bool) Stage {
	return StageFunc(func(w http.ResponseWriter, r *http.Request, next http.Handler) error {
		ex := scope.Get(r.Context())
		body, err := httpx.ReadLimited(r, int64(ex.Agent.MaxRequestSize))
		if err != nil {
			return err
		}
		req, value, err := decodeRead(kind, body, reads != nil && reads(ex.Agent))
		if err != nil {
			return err
		}
		if value != nil {
			ex.BodyValue = policy.ChatRequest{Body: body, Messages: len(req.Messages), Value: value}
		}
		ex.Body = body
		ex.PayloadSHA256 = sha256Hex(body)
		ex.Model = req.Model
		ex.Stream = req.Stream
		if req.N != nil {
			ex.Choices = *req.N
		}
		ex.Messages = len(req.Messages)
		ex.TokenEstimate = EstimateTokens(kind, req)
		ex.MaxTokens = req.completionBound()
		ex.NoCompletion = kind == KindEmbeddings
		next.ServeHTTP(w, r)
		return nil
	})
}

// decodeRead is DecodeRequest that, with build, also returns the policy's
// value of the body, built in the strict reading's pass.
func decodeRead(kind Kind, body []byte, build bool) (*Request, any, error) {
	if !build {
		req, err := decodeRequest(kind, body, nil)
		return req, nil, err
	}
	b := policy.NewInputBuilder()
	defer b.Release()
	req, err := decodeRequest(kind, body, b)
	if err != nil {
		return nil, nil, err
	}
	return req, b.Value(), nil
}

// DecodeRequest parses and checks a request body. It is the parser of
// untrusted input that FuzzDecodeRequest exercises.
func DecodeRequest(kind Kind, body []byte) (*Request, error) {
	return decodeRequest(kind, body, nil)
}

// decodeRequest is DecodeRequest that hands the body to sink (nil: none)
// as the strict reading walks it.
func decodeRequest(kind Kind, body []byte, sink sj.Sink) (*Request, error) {
	if len(body) == 0 {
		return nil, apierror.BadRequest("", "We could not parse the JSON body of your request: the body is empty.")
	}
	// encoding/json silently replaces invalid UTF-8; the gateway refuses it
	// instead, so that what is audited is what was sent.
	if !utf8.Valid(body) {
		return nil, apierror.BadRequest("", "The request body is not valid UTF-8.")
	}
	// The one strict reading: no duplicate keys at any depth, no key that
	// differs from a known field only by case, nothing after the value.
	// The typed fields below are then read case-sensitively (json v2's
	// defaults, in one pass), as a provider reads them, so the original
	// bytes can go upstream as they are.
	if err := sj.CheckInto(body, requestFields, sink); err != nil {
		var se *sj.Error
		if errors.As(err, &se) {
			return nil, apierror.BadRequest(se.Path, "Invalid request body: %s.", se.Error())
		}
		return nil, apierror.BadRequest("", "Invalid request body: %v.", err)
	}
	var req Request
	if err := jsonv2.Unmarshal(body, &req); err != nil {
		var se *jsonv2.SemanticError
		if errors.As(err, &se) && se.JSONPointer != "" && se.GoType != nil {
			param := sj.PointerPath(string(se.JSONPointer))
			return nil, apierror.BadRequest(param, "Invalid type for '%s': expected %s.", param, se.GoType.String())
		}
		return nil, apierror.BadRequest("", "We could not parse the JSON body of your request: %s.", jsonReason(err))
	}
	if req.Model == "" {
		return nil, apierror.BadRequest("model", "Missing required parameter: 'model'.")
	}
	switch kind {
	case KindChat:
		if len(req.Messages) == 0 {
			return nil, apierror.BadRequest("messages", "Missing required parameter: 'messages'.")
		}
		for i, m := range req.Messages {
			if m.Role == "" {
				return nil, apierror.BadRequest("messages["+strconv.Itoa(i)+"].role", "Missing required parameter: 'messages[%d].role'.", i)
			}
		}
	case KindEmbeddings:
		if len(req.Input) == 0 || string(req.Input) == "null" {
			return nil, apierror.BadRequest("input", "Missing required parameter: 'input'.")
		}
	}
	if err := notNegative("max_tokens", req.MaxTokens); err != nil {
		return nil, err
	}
	if err := notNegative("max_completion_tokens", req.MaxCompletionTokens); err != nil {
		return nil, err
	}
	return &req, nil
}

// notNegative refuses a negative count the request set. (A map of the two
// ranged over cost every request a map's hashing.)
func notNegative(name string, p *int) error {
	if p != nil && *p < 0 {
		return apierror.BadRequest(name, "Invalid '%s': must not be negative.", name)
	}
	return nil
}

func jsonReason(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Error() + " at byte " + strconv.FormatInt(se.Offset, 10)
	}
	return err.Error()
}

// completionBound is the completion tokens the request allows at most, 0
// when it sets no bound.
func (r *Request) completionBound() int {
	for _, p := range []*int{r.MaxCompletionTokens, r.MaxTokens} {
		if p != nil && *p > 0 {
			return *p
		}
	}
	return 0
}

// EstimateTokens approximates the prompt's tokens before the call (about
// four bytes of text a token, plus the per-message overhead of the chat
// format). The upstream's reported usage settles the difference afterwards.
func EstimateTokens(kind Kind, req *Request) int {
	if kind == KindEmbeddings {
		return (len(req.Input) + 3) / 4
	}
	n := 3
	for _, m := range req.Messages {
		n += 4 + (len(m.Content)+3)/4
	}
	return n
}
