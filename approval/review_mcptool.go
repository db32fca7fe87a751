package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"html/template"

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
	var c struct {
		Method      string          `json:"method"`
		Server      string          `json:"server"`
		Tool        string          `json:"tool"`
		ApprovedSHA string          `json:"approved_sha256"`
		Approved    json.RawMessage `json:"approved"`
		ServedSHA   string          `json:"served_sha256"`
		Served      json.RawMessage `json:"served"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(content)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	if c.Method != "tools/definition" || c.Server == "" || c.Tool == "" || len(c.Served) == 0 {
		return nil, errors.New("not a tool definition review")
	}
	v := &definitionReview{Server: c.Server, Tool: c.Tool, ApprovedSHA: c.ApprovedSHA, ServedSHA: c.ServedSHA}
	indent := func(raw json.RawMessage) string {
		var b bytes.Buffer
		if string(raw) == "null" || json.Indent(&b, raw, "", "  ") != nil {
			return ""
		}
		return b.String()
	}
	v.Approved, v.Served = indent(c.Approved), indent(c.Served)
	v.Diff = textdiff.HTML(v.Approved, v.Served)
	return v, nil
}
