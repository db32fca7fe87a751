package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"html/template"
	"slices"

	"github.com/sacpgw/gateway/internal/textdiff"
)

// definitionReview is the review page's view of an MCP tool whose
// definition changed (TypeMCPTool): the approved and the served
// definitions side by side, and what changed between them.
type definitionReview struct {
	Server, Tool           string
	ApprovedSHA, ServedSHA string
	// Approved and Served are the definitions, indented; Approved is
	// empty when only its hash was known (pinned in the configuration).
	Approved, Served string
	Diff             template.HTML
}

// parseDefinitionContent reads the MCP door's content of a changed tool
// definition.
func parseDefinitionContent(content string) (*definitionReview, error) {
	// Read as members, strictly: exactly those the door writes.
	var c map[string]json.RawMessage
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		return nil, err
	}
	for k := range c {
		if !slices.Contains([]string{"method", "server", "tool", "approved_sha256", "approved", "served_sha256", "served"}, k) {
			return nil, errors.New("unknown member " + k)
		}
	}
	text := func(k string) string {
		var s string
		_ = json.Unmarshal(c[k], &s)
		return s
	}
	if text("method") != "tools/definition" || text("server") == "" || text("tool") == "" || len(c["served"]) == 0 {
		return nil, errors.New("not a tool definition review")
	}
	v := &definitionReview{Server: text("server"), Tool: text("tool"), ApprovedSHA: text("approved_sha256"), ServedSHA: text("served_sha256")}
	indent := func(raw json.RawMessage) string {
		var b bytes.Buffer
		if string(raw) == "null" || json.Indent(&b, raw, "", "  ") != nil {
			return ""
		}
		return b.String()
	}
	v.Approved, v.Served = indent(c["approved"]), indent(c["served"])
	v.Diff = textdiff.HTML(v.Approved, v.Served)
	return v, nil
}
