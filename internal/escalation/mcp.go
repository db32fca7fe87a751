package escalation

import "github.com/go-json-experiment/json/jsontext"

// MCPCall is the Content of a TypeMCP escalation: the tool call exactly as
// its server will receive it (the arguments and _meta redacted, in RFC
// 8785 form) and the SHA-256 of those arguments. The MCP door writes it (in
// RFC 8785 form, whose SHA-256 binds the person's decision) and reads it
// back when a person decides; the review page reads it to show the call.
// One type serves both, so the page cannot drift from what the decision
// binds.
type MCPCall struct {
	Method          string         `json:"method"`
	Server          string         `json:"server"`
	Tool            string         `json:"tool"`
	Description     string         `json:"description"`
	Annotations     jsontext.Value `json:"annotations"`
	Arguments       jsontext.Value `json:"arguments"`
	ArgumentsSHA256 string         `json:"arguments_sha256"`
	// Meta is the call's _meta, which the server receives and the grant
	// binds; absent when the call has none.
	Meta jsontext.Value `json:"meta,omitzero"`
	// Via is the virtual server the agent called through, if any.
	Via string `json:"via,omitzero"`
	// Held says the agent waits for the decision (a held call): the
	// person sees who waits and until when, and that approving runs the
	// call at once.
	Held *MCPHeld `json:"held,omitzero"`
}

// MCPHeld is who waits for a held call's decision and until when.
type MCPHeld struct {
	// Until is when the agent stops waiting (RFC 3339, UTC).
	Until string `json:"until"`
	// Behalf is the person the agent acts for, when it acts for one.
	Behalf string `json:"behalf,omitzero"`
}
