package proxy

import (
	"bytes"
	"fmt"
	"net/http"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/redact"
)

// RedactRequests is the stage for protocol.redaction.requests: every
// string the agent wrote is redacted before it leaves for the provider,
// and a request that trips a blocking detector is refused with 400
// content_filter.
func RedactRequests(r *redact.Redactor) Stage {
	return StageFunc(func(w http.ResponseWriter, req *http.Request, next http.Handler) error {
		ex := scope.Get(req.Context())
		body, res, err := redactPrompt(r, ex.Body)
		if err != nil {
			return apierror.BadRequest("", "Cannot scan the request for redaction: %v.", err)
		}
		ex.Redacted(res.Counts)
		if res.Blocked != "" {
			ex.Check(scope.Verdict{Check: scope.CheckRequestRedaction, Verdict: "blocked", Detector: res.Blocked})
			return &apierror.Error{Status: http.StatusBadRequest, Type: apierror.TypeInvalidRequest, Code: "content_filter",
				Message: fmt.Sprintf("The prompt contains data that may not leave the organisation (%s).", res.Blocked)}
		}
		ex.Check(scope.Verdict{Check: scope.CheckRequestRedaction, Verdict: "applied", Count: res.Total()})
		ex.Body = body
		next.ServeHTTP(w, req)
		return nil
	})
}

// redactPrompt redacts every string of a request body (at every depth:
// message names, content parts, tool call arguments and the JSON inside
// them, tool descriptions, embeddings input), except the request's
// structural fields: model, role and type.
func redactPrompt(r *redact.Redactor, body []byte) ([]byte, redact.Result, error) {
	return redactDoc(r, body, requestFields, structuralRequest, nil)
}

// sseEvent frames data as one SSE event. Data holding line breaks (an
// upstream event whose JSON spanned several data lines: its breaks are JSON
// whitespace) goes out as one data line per line, which a client joins back
// into the same bytes; written on one line, the break would end it, and
// the client would read the JSON cut short.
func sseEvent(data []byte) []byte {
	out := make([]byte, 0, len(data)+8)
	for {
		out = append(out, "data: "...)
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			out = append(out, data...)
			break
		}
		out = append(out, data[:i]...)
		out = append(out, '\n')
		data = data[i+1:]
	}
	return append(out, '\n', '\n')
}
