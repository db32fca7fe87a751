package sacp

// The fixed texts of the fallback object (seed 000 7.2).
const (
	FallbackThought = "System Note: LLM failed to provide structured JSON output."
	FallbackMessage = "The LLM returned an invalid response format."
)

// Fallback wraps an answer that could not be made valid into a SACP object
// (seed 000 7.2, SPEC 4.1 step 5), so the workflow downstream still gets the
// protocol's shape: status "failure" and the raw text under data.raw_output.
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
