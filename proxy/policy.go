package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/sacpgw/gateway/apierror"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/sacp"
	"github.com/sacpgw/gateway/scope"
)

// Policies is what the proxy asks of the Rego engine (policy.Engine).
type Policies interface {
	ChatDeny(ctx context.Context, input map[string]any) (policy.ChatDecision, error)
	Guardrails(ctx context.Context, input map[string]any) (policy.GuardrailDecision, error)
}

var _ Policies = (*policy.Engine)(nil)

// ChatPolicy is the stage applying data.gateway.chat.deny to every chat
// request. A non-empty set of reasons is a 403 policy_denied naming them;
// an engine that errs or finds the decision undefined denies too (fail
// closed), and says so.
func ChatPolicy(p Policies) Stage {
	return StageFunc(func(w http.ResponseWriter, r *http.Request, next http.Handler) error {
		ex := scope.Get(r.Context())
		var req map[string]any
		if err := json.Unmarshal(ex.Body, &req); err != nil {
			return apierror.BadRequest("", "We could not parse the JSON body of your request.")
		}
		d, _ := p.ChatDeny(r.Context(), map[string]any{"agent": policy.AgentInput(ex.Agent), "request": req, "model": ex.Model})
		verdict := map[string]any{"verdict": "allow", "decision_id": d.DecisionID, "revision": d.Revision}
		if d.Deny {
			verdict["verdict"] = "deny"
			verdict["reasons"] = d.Reasons
			if d.FailClosed {
				verdict["fail_closed"] = true
			}
			ex.Check("policy", verdict)
			return apierror.Forbidden("Denied by policy: " + strings.Join(d.Reasons, "; ") + ".")
		}
		ex.Check("policy", verdict)
		next.ServeHTTP(w, r)
		return nil
	})
}

// guard applies data.gateway.guardrails.response to a validated answer
// (seed 000 9.1): it may force status "failure" and withhold the message.
func guard(ctx context.Context, p Policies, ex *scope.Exchange, resp *sacp.Response) {
	if p == nil {
		return
	}
	var data any
	_ = json.Unmarshal(resp.Data, &data)
	obj := map[string]any{"thought": resp.Thought, "status": resp.Status, "data": data, "message": resp.Message}
	if resp.NextStepHint != "" {
		obj["next_step_hint"] = resp.NextStepHint
	}
	d, _ := p.Guardrails(ctx, map[string]any{"agent": policy.AgentInput(ex.Agent), "response": obj})
	verdict := map[string]any{"verdict": "pass", "decision_id": d.DecisionID, "revision": d.Revision}
	if d.Status != "" && d.Status != resp.Status {
		verdict["verdict"] = "forced_status"
		verdict["from"] = resp.Status
		resp.Status = d.Status
	}
	if d.RedactMessage {
		verdict["redact_message"] = true
		resp.Message = fmt.Sprintf("[REDACTED:guardrail] %s", d.Reason)
	}
	if d.Reason != "" {
		verdict["reason"] = d.Reason
	}
	if d.FailClosed {
		verdict["fail_closed"] = true
	}
	ex.Check("guardrails", verdict)
}
