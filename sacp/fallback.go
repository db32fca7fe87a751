package sacp

// The fixed texts of the SACP fallback object (docs/glossary.md), as the
// protocol words them.
const (
	FallbackThought = "System Note: LLM failed to provide structured JSON output."
	FallbackMessage = "The LLM returned an invalid response format."
)

// Fallback wraps an answer that could not be made valid into a SACP object
// (the SACP fallback object of docs/glossary.md, the gateway's answer once the
// re-asks are spent), so the workflow downstream still gets the protocol's
// shape: status "failure" and the raw text under data.raw_output.
// Invalid UTF-8 in raw becomes U+FFFD, as in any JSON string.
func Fallback(raw string) Response {
	data, err := encode(struct {
		RawOutput string `json:"raw_output"`
	}{raw})
	if err != nil {
		// Encoding a struct of one string cannot fail; keep the shape anyway.
		data = []byte(`{"raw_output":""}`)
	}
	return Response{
		Thought: FallbackThought,
		Status:  StatusFailure,
		Data:    data,
		Message: FallbackMessage,
	}
}
