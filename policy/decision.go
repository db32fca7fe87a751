// Package policy evaluates the gateway's Rego policies (OPA v1, prepared
// once, swapped atomically on reload, fail closed) and its RBAC (casbin).
//
// The Engine answers four decision points (docs/reference.md, Rego decision
// points): approval, chat.deny, guardrails.response and spawn. Every answer
// carries a fresh DecisionID and the Revision (SHA-256 of the Rego that
// decided) for the audit trail. An evaluation error, an undefined result or a
// result of the wrong shape never allows anything: the decision is the deny
// of its decision point, with FailClosed set and the cause in Error.
package policy

import "time"

// Decision points, as named in ShadowEvent.Point and in the docs.
const (
	PointApproval   = "approval"
	PointChat       = "chat.deny"
	PointGuardrails = "guardrails.response"
	PointSpawn      = "spawn"
	PointMessages   = "messages.deny"
	PointWorkflow   = "workflow.allow"
	PointSignedURL  = "workflow.signed_url_allowed"
)

// Rule ids of the violations the engine itself adds when it fails closed.
const (
	// RulePolicyError: the policy raised an error (conflicting values,
	// builtin error, cancelled or timed-out evaluation).
	RulePolicyError = "policy.error"
	// RulePolicyUndefined: the decision rule is missing or produced no value.
	RulePolicyUndefined = "policy.undefined"
	// RulePolicyMalformed: the decision rule produced a value of the wrong shape.
	RulePolicyMalformed = "policy.malformed"
)

// Violation is one broken rule of an approval decision.
type Violation struct {
	Rule        string `json:"rule"`
	Description string `json:"description"`
	Suggestion  string `json:"suggestion,omitempty"`
}

// ApprovalDecision is data.gateway.approval.decision (docs/approval.md, "What
// the policy receives"), plus the decision id and policy revision the engine
// adds.
type ApprovalDecision struct {
	// Status is approved, rejected, escalated or clarification_needed.
	Status           string      `json:"status"`
	Confidence       float64     `json:"confidence"`
	Feedback         string      `json:"feedback"`
	Violations       []Violation `json:"violations"`
	Suggestions      []string    `json:"suggestions"`
	Constraints      []string    `json:"constraints"`
	ApprovedLocation string      `json:"approved_location,omitempty"`
	EscalationReason string      `json:"escalation_reason,omitempty"`

	// DecisionID identifies this evaluation in the audit trail.
	DecisionID string `json:"-"`
	// Revision is the SHA-256 of the loaded Rego that decided.
	Revision string `json:"-"`
	// FailClosed is true when the policy errored, was undefined or returned
	// a malformed value, and the engine rejected on its behalf.
	FailClosed bool `json:"-"`
	// Error is why the engine failed closed ("" otherwise).
	Error string `json:"-"`
}

// ChatDecision is data.gateway.chat.deny: a non-empty set of reasons denies
// the chat request (403 policy_denied with the reasons). The same shape
// answers data.gateway.messages.deny for an agent-to-agent message.
type ChatDecision struct {
	// Deny is true when Reasons is non-empty, or the engine failed closed.
	Deny bool `json:"deny"`
	// Reasons are the policy's reasons, sorted.
	Reasons []string `json:"reasons"`

	DecisionID string `json:"-"`
	Revision   string `json:"-"`
	FailClosed bool   `json:"-"`
	Error      string `json:"-"`
}

// GuardrailDecision is data.gateway.guardrails.response applied to a
// validated SACP answer (the protocol's guardrails; docs/policy-authoring.md,
// guardrails.response).
type GuardrailDecision struct {
	// Status is the SACP status the answer must carry (success, failure,
	// clarification_needed or completed). When it differs from the answer's
	// own status, the guardrail forced it.
	Status string `json:"status"`
	// RedactMessage: replace the answer's message before it leaves.
	RedactMessage bool `json:"redact_message"`
	// Reason explains a forced status or redaction ("" when nothing applies).
	Reason string `json:"reason,omitempty"`

	DecisionID string `json:"-"`
	Revision   string `json:"-"`
	FailClosed bool   `json:"-"`
	Error      string `json:"-"`
}

// WorkflowDecision is data.gateway.workflow.allow: whether an agent may
// start a workflow run (docs/workflows.md).
type WorkflowDecision struct {
	Allow bool
	// Reason says why not when the engine failed closed.
	Reason string

	DecisionID string
	Revision   string
	FailClosed bool
	Error      string
}

// SpawnDecision is data.gateway.spawn.decision for a SPAWN_AGENT message
// (docs/agent-messaging.md, Spawning).
type SpawnDecision struct {
	// Status is approved, rejected or escalated.
	Status  string   `json:"status"`
	Reasons []string `json:"reasons"`

	DecisionID string `json:"-"`
	Revision   string `json:"-"`
	FailClosed bool   `json:"-"`
	Error      string `json:"-"`
}

// ReloadEvent reports one attempt to load a policy directory, successful or
// not; the gateway writes it to the audit trail as policy.reload.
type ReloadEvent struct {
	// OK is true when the new policies compiled and now serve.
	OK bool `json:"ok"`
	// Shadow is true for the shadow directory, false for the live one.
	Shadow bool `json:"shadow"`
	// Dir is the directory that was loaded, or the bundle's source.
	Dir string `json:"dir"`
	// BundleRevision is the .manifest revision of the bundle now serving
	// (with a policy bundle only).
	BundleRevision string `json:"bundle_revision,omitempty"`
	// Revision is the revision now serving: the new one when OK, the last
	// good one (unchanged) otherwise.
	Revision string `json:"revision"`
	// Attempted is the revision of the files that were tried.
	Attempted string `json:"attempted"`
	// Error is the loader's or compiler's error, one "file:line: message"
	// per line ("" when OK).
	Error string `json:"error,omitempty"`
	// Files are the Rego files tried, relative to Dir, sorted.
	Files []string `json:"files"`
	// At is when the attempt finished.
	At time.Time `json:"at"`
}

// ShadowEvent reports a decision on which the shadow policies disagree with
// the live ones. The live decision was already returned; this is for audit
// and metrics only.
type ShadowEvent struct {
	// Point is the decision point (PointApproval, PointChat, ...).
	Point string `json:"point"`
	// Live and Shadow summarize both decisions, e.g. "rejected [authorization]"
	// or "deny [too many messages]".
	Live   string `json:"live"`
	Shadow string `json:"shadow"`
	// LiveDecisionID is the id returned to the caller; ShadowDecisionID is
	// the shadow evaluation's own id.
	LiveDecisionID   string `json:"live_decision_id"`
	ShadowDecisionID string `json:"shadow_decision_id"`
	LiveRevision     string `json:"live_revision"`
	ShadowRevision   string `json:"shadow_revision"`
}

// Stats are the engine's counters since New, for /metrics.
type Stats struct {
	// Reloads and ReloadFailures count attempts on the live directory after
	// the initial load.
	Reloads        uint64 `json:"reloads"`
	ReloadFailures uint64 `json:"reload_failures"`
	// ShadowReloads and ShadowReloadFailures count them on the shadow directory.
	ShadowReloads        uint64 `json:"shadow_reloads"`
	ShadowReloadFailures uint64 `json:"shadow_reload_failures"`
	// Decisions counts live decisions; FailClosed those the engine denied
	// on the policy's behalf.
	Decisions  uint64 `json:"decisions"`
	FailClosed uint64 `json:"fail_closed"`
	// ShadowEvaluations counts shadow decisions, ShadowDisagreements those
	// that differed from the live one, ShadowDropped those skipped because
	// the shadow queue was full.
	ShadowEvaluations   uint64 `json:"shadow_evaluations"`
	ShadowDisagreements uint64 `json:"shadow_disagreements"`
	ShadowDropped       uint64 `json:"shadow_dropped"`
	// LastReloadOK is false while the newest live files do not compile
	// (the previous revision keeps serving).
	LastReloadOK bool `json:"last_reload_ok"`
	// LastReloadError is the compiler's error of the newest failed attempt.
	LastReloadError string `json:"last_reload_error,omitempty"`
}
