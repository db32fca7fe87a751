package approval

import (
	"time"

	"github.com/sacpgw/gateway/policy"
)

// Request types of the approval protocol.
const (
	TypeApproval = "APPROVAL"
	TypeQuery    = "QUERY"
	TypeValidate = "VALIDATE"
	TypeReport   = "REPORT"
)

// Actions of the approval protocol.
const (
	ActionCreate = "create"
	ActionModify = "modify"
	ActionDelete = "delete"
	ActionRead   = "read"
)

// Decision statuses of the approval protocol's LibrarianResponse.
const (
	StatusApproved            = "approved"
	StatusRejected            = "rejected"
	StatusEscalated           = "escalated"
	StatusClarificationNeeded = "clarification_needed"
)

// Reviewers' decisions.
const (
	reviewDecisionApprove = "approve"
	reviewDecisionReject  = "reject"
)

// Escalation kinds.
const (
	escalationKindPolicy    = "policy"
	escalationKindDeviation = "deviation"
	escalationKindReport    = "report"
)

// History "by" values other than agents and people.
const (
	byGateway      = "gateway"
	byPolicy       = "policy"
	byExpiry       = "system:expiry"
	byAuditFailure = "system:audit"
)

// Violation rules the service adds to the policy's.
const (
	violationPolicyError  = "policy.error"
	violationPolicyStatus = "policy.unknown_status"
	violationAuthz        = "authz.denied"
	violationReportState  = "report.state"
	violationReportType   = "report.target"
	// violationFacts: the gateway could not establish the facts the policy
	// decides on (target existence, references), so it did not ask.
	violationFacts = "facts.unavailable"
	// violationExpired is on the response of an approval that lapsed.
	violationExpired = "approval.expired"
)

var (
	requestTypes = []string{TypeApproval, TypeQuery, TypeValidate, TypeReport}
	actions      = []string{ActionCreate, ActionModify, ActionDelete, ActionRead}
	targetTypes  = []string{"architecture", "design", "code", "test", "docs"}
)

// State is a governance state of the approval protocol (docs/approval.md,
// States).
type State string

// The governance states. A request moves PENDING → VALIDATING → APPROVED |
// REJECTED | ESCALATED; an ESCALATED one becomes APPROVED or REJECTED by a
// person (or REJECTED by expiry after timeouts.escalation), and an APPROVED
// one COMPLETED by its agent's REPORT, or EXPIRED when no REPORT completed
// it within timeouts.approval_validity of its approval.
const (
	StatePending    State = "PENDING"
	StateValidating State = "VALIDATING"
	StateApproved   State = "APPROVED"
	StateRejected   State = "REJECTED"
	StateEscalated  State = "ESCALATED"
	StateCompleted  State = "COMPLETED"
	// StateExpired is an approval that lapsed: the agent did not REPORT
	// the change done within timeouts.approval_validity, so the approval
	// no longer authorises it (a late REPORT gets 409) and the agent must
	// ask again.
	StateExpired State = "EXPIRED"
)

// Terminal reports whether no further transition can happen.
func (s State) Terminal() bool {
	return s == StateRejected || s == StateCompleted || s == StateExpired
}

// AgentRequest is the approval protocol's request message, with its JSON
// names, plus the three fields a REPORT carries (request_id, completed,
// changes_made).
type AgentRequest struct {
	AgentID   string     `json:"agent_id"`
	SessionID string     `json:"session_id,omitempty"`
	Timestamp *time.Time `json:"timestamp,omitempty"`

	RequestType string `json:"request_type"`
	Action      string `json:"action,omitempty"`

	TargetType string `json:"target_type,omitempty"`
	TargetPath string `json:"target_path,omitempty"`
	TargetID   string `json:"target_id,omitempty"`

	Content   string `json:"content,omitempty"`
	Rationale string `json:"rationale,omitempty"`

	References  []string            `json:"references,omitempty"`
	ContextUsed []string            `json:"context_used,omitempty"`
	Deviations  []map[string]string `json:"deviations,omitempty"`

	RiskAssessment string `json:"risk_assessment,omitempty"`

	// RequestID names the APPROVED request a REPORT is about.
	RequestID string `json:"request_id,omitempty"`
	// Completed says whether the reported change was applied.
	Completed *bool `json:"completed,omitempty"`
	// ChangesMade describes what the agent did; its content_sha256 is
	// checked against the approved content.
	ChangesMade *ChangesMade `json:"changes_made,omitempty"`
}

// ChangesMade is a REPORT's account of what was changed. Agents may send a
// plain string (a summary), a list of strings (the paths touched) or this
// object; ContentSHA256, when present, claims the digest of the content
// actually written and must equal the approved one.
type ChangesMade struct {
	Summary       string   `json:"summary,omitempty"`
	Files         []string `json:"files,omitempty"`
	ContentSHA256 string   `json:"content_sha256,omitempty"`
}

// NodeSummary is one specification in a QUERY answer.
type NodeSummary struct {
	ID    string   `json:"id"`
	Title string   `json:"title"`
	Type  string   `json:"type,omitempty"`
	Tags  []string `json:"tags"`
	Path  string   `json:"path"`
	Score float64  `json:"score"`
}

// LibrarianResponse is the approval protocol's response message with its JSON
// names. Optional fields of the protocol are null when they do not apply, so
// clients built on the protocol's dataclass find every key. ContentSHA256,
// State and DecisionID are the gateway's additions.
type LibrarianResponse struct {
	RequestID        string    `json:"request_id"`
	Timestamp        time.Time `json:"timestamp"`
	ProcessingTimeMS int64     `json:"processing_time_ms"`

	Status     string  `json:"status"`
	Confidence float64 `json:"confidence"`

	Feedback    string             `json:"feedback"`
	Violations  []policy.Violation `json:"violations"`
	Suggestions []string           `json:"suggestions"`

	ApprovedLocation *string  `json:"approved_location"`
	AssignedID       *string  `json:"assigned_id"`
	Constraints      []string `json:"constraints"`

	EscalationReason    *string `json:"escalation_reason"`
	HumanReviewURL      *string `json:"human_review_url"`
	EstimatedReviewTime *int    `json:"estimated_review_time"`

	Context       map[string]any `json:"context"`
	RelevantNodes []NodeSummary  `json:"relevant_nodes"`

	// ContentSHA256 is the lowercase hex SHA-256 of the request's content:
	// an approval covers exactly these bytes.
	ContentSHA256 string `json:"content_sha256,omitempty"`
	// State is the request's governance state after this response.
	State State `json:"state"`
	// DecisionID identifies the policy evaluation in the audit trail.
	DecisionID string `json:"decision_id,omitempty"`
}

// Transition is one entry of a request's history.
type Transition struct {
	State State     `json:"state"`
	At    time.Time `json:"at"`
	By    string    `json:"by"`
	// Subject and Email name a person who signed in with the
	// organisation's provider, as its ID token did.
	Subject string `json:"subject,omitempty"`
	Email   string `json:"email,omitempty"`
	// Note explains an entry that is not a plain state change (a REPORT of
	// an unfinished change, a deviation, an expiry).
	Note string `json:"note,omitempty"`
}

// Escalation is why a request waits for a person, and what they decided.
type Escalation struct {
	// Kind is "policy" (the policy escalated the request), "deviation" (a
	// REPORT claimed content other than what was approved) or "report" (the
	// policy escalated a REPORT).
	Kind   string    `json:"kind"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	// ReportedSHA256 is the digest a deviating REPORT claimed.
	ReportedSHA256 string `json:"reported_sha256,omitempty"`
	// Report is the deviating REPORT itself.
	Report *AgentRequest `json:"report,omitempty"`
	// Graph is an SVG drawing the gateway made of what the escalation is
	// about (a workflow with the path its run took; escalation.Request's
	// Graph). The review page shows it inline only after checking it is
	// such a drawing (checkGraph).
	Graph string `json:"graph,omitempty"`
	// Review is set once someone decided.
	Review *Review `json:"review,omitempty"`
}

// Review is a person's (or the expiry's) decision on an escalation.
type Review struct {
	Decision string `json:"decision"`
	Reviewer string `json:"reviewer"`
	// Subject and Email name a reviewer who signed in with the
	// organisation's provider, as its ID token did.
	Subject string    `json:"subject,omitempty"`
	Email   string    `json:"email,omitempty"`
	Comment string    `json:"comment,omitempty"`
	At      time.Time `json:"at"`
}

// Decision is what the policy decided, as recorded.
type Decision struct {
	ID         string             `json:"id,omitempty"`
	Revision   string             `json:"revision,omitempty"`
	Status     string             `json:"status"`
	Violations []policy.Violation `json:"violations"`
	Error      string             `json:"error,omitempty"`
}

// Record is everything stored about one request. Stores serialise it as
// JSON, so it must survive a round trip unchanged.
type Record struct {
	ID      string       `json:"request_id"`
	AgentID string       `json:"agent_id"`
	State   State        `json:"state"`
	History []Transition `json:"history"`
	Request AgentRequest `json:"request"`
	// ContentSHA256 is the digest of Request.Content.
	ContentSHA256 string             `json:"content_sha256"`
	Decision      *Decision          `json:"decision,omitempty"`
	Response      *LibrarianResponse `json:"response,omitempty"`
	Escalation    *Escalation        `json:"escalation,omitempty"`
	CreatedAt     time.Time          `json:"created_at"`
	UpdatedAt     time.Time          `json:"updated_at"`
}

// move appends a transition and sets the state.
func (r *Record) move(to State, at time.Time, by, note string) {
	r.State = to
	r.UpdatedAt = at
	r.History = append(r.History, Transition{State: to, At: at, By: by, Note: note})
}

// StatusResponse is GET /agent/status/{request_id} (docs/approval.md), plus the
// escalation (with its review) when there is one.
type StatusResponse struct {
	RequestID        string             `json:"request_id"`
	ProcessingTimeMS int64              `json:"processing_time_ms"`
	State            State              `json:"state"`
	History          []Transition       `json:"history"`
	Response         *LibrarianResponse `json:"response"`
	Escalation       *Escalation        `json:"escalation,omitempty"`
}

func contains(set []string, v string) bool {
	for _, s := range set {
		if s == v {
			return true
		}
	}
	return false
}
