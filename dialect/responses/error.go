package responses

import (
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// Error returns the body of an error answer in the Responses API's form,
// which is OpenAI's error shape ({"error": {message, type, param, code}}):
// an OpenAI error body passes through, re-encoded with exactly those four
// members (type, param and code null-filled or taken as they are; a number
// code becomes its digits), so what the client reads is the shape its SDK
// expects and nothing a provider added. A body that is not one (not JSON,
// not that shape, no message, or an {"error": "text"} of some
// OpenAI-compatible providers) is wrapped: the message is the text of
// {"error": "text"} or else the status's text, never the body itself,
// which may be a provider's HTML page; the type follows the status:
//
//	400 invalid_request_error    401 authentication_error
//	403 permission_error         404 not_found_error
//	429 rate_limit_error         other 4xx invalid_request_error
//	5xx and anything else        server_error
//
// The OpenAI SDKs pick their exception by status: the glue keeps the
// status as it is.
func Error(status int, openAIError []byte) []byte {
	out := errorOut{Error: errorDetail{Type: neutral.JSONString(statusType(status)), Param: jsontext.Value("null"), Code: jsontext.Value("null")}}
	object, text := neutral.ReadError(openAIError)
	var a struct {
		Message *string        `json:"message"`
		Type    jsontext.Value `json:"type"`
		Param   jsontext.Value `json:"param"`
		Code    jsontext.Value `json:"code"`
	}
	switch {
	case object != nil && json.Unmarshal(object, &a) == nil && a.Message != nil && strings.TrimSpace(*a.Message) != "":
		out.Error.Message = *a.Message
		if a.Type.Kind() == '"' {
			out.Error.Type = a.Type
		}
		if a.Param.Kind() == '"' {
			out.Error.Param = a.Param
		}
		switch a.Code.Kind() {
		case '"':
			out.Error.Code = a.Code
		case '0':
			out.Error.Code = neutral.JSONString(string(a.Code))
		}
	case text != "":
		out.Error.Message = text
	default:
		out.Error.Message = neutral.StatusText(status)
	}
	return marshalError(out)
}

func statusType(status int) string {
	if typ := neutral.StatusType(status); typ != "" {
		return typ
	}
	return "server_error"
}

type errorOut struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string         `json:"message"`
	Type    jsontext.Value `json:"type"`
	Param   jsontext.Value `json:"param"`
	Code    jsontext.Value `json:"code"`
}

func marshalError(e errorOut) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		// The values were read as valid UTF-8: this does not happen.
		return []byte(`{"error":{"message":"The upstream failed.","type":"server_error","param":null,"code":null}}`)
	}
	return b
}

// apiError is OpenAI's error object, in a stream's error event.
type apiError struct {
	Message string         `json:"message"`
	Type    string         `json:"type"`
	Param   jsontext.Value `json:"param"`
	Code    jsontext.Value `json:"code"`
}

// streamError is what a stream's error event says for an OpenAI error
// object: the code is the error's code (its type when it has none), the
// code of response.failed's error one of the Responses API's
// (rate_limit_exceeded for a rate limit, server_error otherwise).
func (e *apiError) streamError() (code, failedCode, message string, param *string) {
	switch e.Code.Kind() {
	case '"':
		_ = json.Unmarshal(e.Code, &code)
	case '0':
		code = string(e.Code)
	}
	if code == "" {
		code = e.Type
	}
	if code == "" {
		code = "server_error"
	}
	failedCode = "server_error"
	if e.Type == "rate_limit_error" || code == "rate_limit_exceeded" {
		failedCode = "rate_limit_exceeded"
	}
	message = e.Message
	if strings.TrimSpace(message) == "" {
		message = "The upstream failed."
	}
	if e.Param.Kind() == '"' {
		var p string
		if json.Unmarshal(e.Param, &p) == nil {
			param = &p
		}
	}
	return code, failedCode, message, param
}
