package neutral

// Choice is a choice of a chat completion (Message) or of a stream chunk
// (Delta).
type Choice struct {
	Index        int     `json:"index"`
	Message      *Answer `json:"message"`
	Delta        *Answer `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// Answer is a choice's message or delta.
type Answer struct {
	Content   *string    `json:"content"`
	Refusal   *string    `json:"refusal"`
	ToolCalls []ToolCall `json:"tool_calls"`
}

// ToolCall is a tool call of an answer.
type ToolCall struct {
	Index    *int   `json:"index"` // streams only
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}
