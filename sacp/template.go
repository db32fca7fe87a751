package sacp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"unicode/utf8"
)

// DefaultTemplate is the SACP protocol's own template text, kept verbatim,
// without a trailing newline (Inject supplies the separator). The fence in
// the fourth line is spliced in because a raw string cannot hold backquotes.
const DefaultTemplate = `### SYSTEM PROTOCOL: RESPONSE FORMAT INSTRUCTIONS
You are a highly organized AI agent integrated into a larger workflow.
CRITICAL: You MUST provide your response in a valid JSON format.
DO NOT include any text outside the JSON block.
DO NOT use markdown code blocks (` + "```json ... ```" + `) unless specifically asked, but the raw response MUST be parseable JSON.

Your response schema is:
{
    "thought": "Your reasoning process here...",
    "status": "success" | "failure" | "clarification_needed",
    "data": {
        "key": "value"
        // Any structured data extracted or generated
    },
    "message": "The final human-readable answer."
}

Example:
{
    "thought": "I need to calculate the sum. 5+5 is 10.",
    "status": "success",
    "data": { "result": 10 },
    "message": "The result is 10."
}`

// Template is the protocol text appended to system prompts.
type Template struct {
	// Text is injected as is.
	Text string
	// SHA256 is the lowercase hex SHA-256 of Text. Audit records carry it so
	// an auditor can tell which instructions the model was given; for a
	// template file it equals `sha256sum FILE`.
	SHA256 string
}

// NewTemplate returns the Template for text with its digest filled in.
func NewTemplate(text string) Template {
	sum := sha256.Sum256([]byte(text))
	return Template{Text: text, SHA256: hex.EncodeToString(sum[:])}
}

// LoadTemplate reads the template override at path (protocol.sacp.template_file).
// An empty path selects DefaultTemplate. The file is used byte for byte, so its
// digest matches the file's; it must be non-empty UTF-8, because an empty file
// would silently switch the protocol off and invalid UTF-8 would be mangled
// when the request is re-encoded.
func LoadTemplate(path string) (Template, error) {
	if path == "" {
		return NewTemplate(DefaultTemplate), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Template{}, fmt.Errorf("sacp template %s: %w", path, err)
	}
	switch {
	case len(b) == 0:
		return Template{}, fmt.Errorf("sacp template %s: file is empty", path)
	case !utf8.Valid(b):
		return Template{}, fmt.Errorf("sacp template %s: file is not valid UTF-8", path)
	}
	return NewTemplate(string(b)), nil
}
