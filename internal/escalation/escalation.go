// Package escalation is the contract between the approval protocol's human
// review and the other front doors that need a person's decision (a spawn
// the policy escalated, an agent-to-agent error that needs a human): they
// open a review through an Opener and are told the outcome through a
// Resolver, without importing the approval service. The wiring joins them.
package escalation

import "context"

// Types of the escalations other front doors open.
const (
	TypeSpawn   = "SPAWN_AGENT"
	TypeMessage = "MESSAGE"
	// TypeWorkflow is a workflow run that waits for a person's answer.
	TypeWorkflow = "WORKFLOW_PAUSE"
	// TypeMCP is an MCP tool call the policy sent to a person: approved,
	// the same agent's same call (tool and arguments) passes once.
	TypeMCP = "MCP_TOOL_CALL"
	// TypeA2AInput is an A2A task that asks for input (input-required,
	// auth-required), routed to a person: approved, the person's comment
	// is the task's next message; rejected, the task is canceled.
	TypeA2AInput = "A2A_INPUT"
	// TypeMCPTool is an MCP tool whose definition changed since it was
	// approved: approved, the new definition is served.
	TypeMCPTool = "MCP_TOOL_DEFINITION"
)

// Request opens a review.
type Request struct {
	// Type is TypeSpawn, TypeMessage, TypeWorkflow, TypeMCP or TypeA2AInput.
	Type string
	// AgentID is the agent the escalation is about (the one that waits).
	AgentID   string
	SessionID string
	// Action is a short label shown to the reviewer ("spawn VISA_AGENT",
	// "execution_failed").
	Action string
	// Content is what the reviewer judges (the message, as JSON); its
	// SHA-256 binds the decision.
	Content string
	// Reason is why a person must decide.
	Reason string
	// DecisionID and Revision identify the policy evaluation, if any.
	DecisionID string
	Revision   string
	// Graph, if set, is an SVG drawing the gateway made of what the review
	// is about (a workflow with the path its run took): shown to the
	// reviewer inline. Never a document from an agent.
	Graph string
}

// Opened is a review that waits for a person.
type Opened struct {
	ID string
	// ReviewURL is the page where a person decides; empty when the
	// gateway has no public URL configured.
	ReviewURL string
}

// Opener opens reviews (the approval service).
type Opener interface {
	Open(ctx context.Context, req Request) (Opened, error)
}

// Decided is a person's (or the expiry's) decision on a review.
type Decided struct {
	ID      string
	Type    string
	AgentID string
	// Approved is the outcome; State is the approval protocol's state
	// name for it (APPROVED or REJECTED).
	Approved bool
	State    string
	// Content is the Request's Content, as the reviewer saw it.
	Content string
	// Reviewer, Decision and Comment are the review, when a person (not
	// the expiry) decided.
	Reviewer string
	Decision string
	Comment  string
}

// Resolver acts on a decision of one Type.
type Resolver func(ctx context.Context, d Decided) error
