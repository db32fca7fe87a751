package messaging

import (
	"encoding/json"
	"net/http"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
)

// checkTestMode reads compact SACP's dry-run flag, ctx.test_mode: a message
// that sets it is checked like any other (sender, recipient, RBAC and
// policy, repeat, redaction, plan) and audited, but reaches nobody. Only
// the exact names count, and a name that differs from them by case alone
// is refused: reading "Test_Mode": true as a real send would deliver what
// its sender meant as a rehearsal.
func (s *Service) checkTestMode(_ *http.Request, in *send) error {
	on, err := testMode(in.msg.Payload)
	if err != nil {
		in.checks["test_mode"] = "invalid"
		return err
	}
	in.testMode = on
	if on {
		in.checks["test_mode"] = true
	}
	return nil
}

// testMode reports whether payload is an object whose ctx has test_mode
// true. The payload passed the strict reader (no repeated names).
func testMode(payload json.RawMessage) (bool, error) {
	var top map[string]json.RawMessage
	if len(payload) == 0 || json.Unmarshal(payload, &top) != nil {
		return false, nil
	}
	ctxRaw, err := exactMember(top, "ctx", "payload")
	if err != nil || ctxRaw == nil {
		return false, err
	}
	var ctx map[string]json.RawMessage
	if json.Unmarshal(ctxRaw, &ctx) != nil {
		return false, nil // ctx that is not an object carries no flag
	}
	flag, err := exactMember(ctx, "test_mode", "payload.ctx")
	if err != nil || flag == nil {
		return false, err
	}
	switch string(flag) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, apierror.BadRequest("payload.ctx.test_mode", "payload.ctx.test_mode must be true or false.")
}

// exactMember is obj's member name, nil when absent; a member whose name
// equals it only when case is ignored is an error.
func exactMember(obj map[string]json.RawMessage, name, at string) (json.RawMessage, error) {
	for k, v := range obj {
		if k == name {
			return v, nil
		}
		if asciiEqualFold(k, name) {
			return nil, apierror.BadRequest(at+"."+k, "%s.%s: did you mean %q? Names are case-sensitive, and a dry-run flag is not guessed.", at, k, name)
		}
	}
	return nil, nil
}

// dryRun answers a test_mode message that passed every check: audited as
// message.request with test_mode, delivered to nobody, 200 with who would
// have received it.
func (s *Service) dryRun(w http.ResponseWriter, r *http.Request, in *send) {
	rec := s.admitted(in, nil, nil)
	rec.Object.Bool("test_mode", true)
	rec.Object.Bool("delivered", false)
	if err := s.audit.Write(r.Context(), rec); err != nil {
		httpx.Fail(w, r, err)
		return
	}
	s.stats.accepted.Add(1)
	httpx.WriteJSON(w, r, http.StatusOK, map[string]any{
		"status":           "VALID",
		"test_mode":        true,
		"message_id":       in.msg.ID,
		"would_deliver_to": names(in.targets),
		"delivered":        false,
	})
}
