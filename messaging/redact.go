package messaging

import (
	"fmt"
	"net/http"

	"github.com/sacpgw/gateway/envelope"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/redact"
)

// redactEnvelope masks what the detectors find in m's payload (its string
// values and member names) and error text, in place
// (protocol.redaction.messages). It returns the counts per detector and,
// when a blocking detector matched, its name: the caller then refuses the
// message instead of relaying it. Numbers and the envelope's own fields
// are left alone.
func redactEnvelope(red *redact.Redactor, m *envelope.Message) (map[string]int, string, error) {
	if red == nil {
		return nil, "", nil
	}
	var res redact.Result
	if len(m.Payload) > 0 {
		out, r, err := red.JSON(m.Payload)
		if err != nil {
			return nil, "", fmt.Errorf("redact payload of %s: %w", m.ID, err)
		}
		res.Add(r)
		m.Payload = out
	}
	if m.Error != nil && m.Error.Message != "" {
		out, r := red.String(m.Error.Message)
		res.Add(r)
		m.Error.Message = out
	}
	return res.Counts, res.Blocked, nil
}

// blockedMessage is the refusal of an envelope that carries a blocking
// detector's value (400 content_filter, as for prompts; docs/reference.md,
// HTTP API).
func blockedMessage(detector string) error {
	return &apierror.Error{Status: http.StatusBadRequest, Type: apierror.TypeInvalidRequest, Code: "content_filter", Param: "payload",
		Message: fmt.Sprintf("The message carries %s data, which this gateway does not relay.", detector)}
}
