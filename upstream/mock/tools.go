package mock

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"
)

// toolResults are the texts answering the tool messages that end the
// conversation ("The tool <name> returned: <content>"), in order: a model
// answers those results after its tool calls. A result is named after the
// call it answers (tool_call_id), else the message's name.
func toolResults(msgs []mockMessage) []string {
	first := len(msgs)
	for first > 0 && msgs[first-1].Role == "tool" {
		first--
	}
	if first == len(msgs) {
		return nil
	}
	names := map[string]string{}
	for i := first - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" && len(msgs[i].ToolCalls) > 0 {
			for _, c := range msgs[i].ToolCalls {
				names[c.ID] = c.Function.Name
			}
			break
		}
	}
	var out []string
	for _, msg := range msgs[first:] {
		name := names[msg.ToolCallID]
		if name == "" {
			name = msg.Name
		}
		if name == "" {
			name = "unknown"
		}
		out = append(out, "The tool "+name+" returned: "+clip(contentText(msg.Content), 200))
	}
	return out
}

// pickTools decides the tool calls of the answer, or the message and
// parameter of a 400. The rule, deterministic:
//
//   - only function tools count; the others (custom tools) are ignored;
//   - tool_choice "none": no call;
//   - tool_choice naming a function: that function (a name not in tools is a
//     400, as OpenAI's);
//   - tool_choice "required": the tools the last user message mentions,
//     else the first tool (without tools, a 400);
//   - tool_choice "auto" or absent: the tools the last user message
//     mentions, unless the conversation ends with tool results, which are
//     then answered in text. A forced choice ("required" or named) calls
//     again even after tool results, as forcing means for OpenAI too;
//   - a tool is mentioned when its name appears in the message as a whole
//     word, case-insensitively ("use get_weather"; not "get_weathers"), and
//     mentioned tools are called in the order of their first mention;
//   - parallel_tool_calls false keeps the first call only.
//
// Unsupported tool_choice objects (allowed_tools, custom) count as "auto".
func (in *mockRequest) pickTools(user string, answered bool) (calls []mockCall, msg, param string) {
	var tools []mockTool
	seen := map[string]bool{}
	for _, t := range in.Tools {
		if t.Type == "function" && t.Function.Name != "" && !seen[t.Function.Name] {
			seen[t.Function.Name] = true
			tools = append(tools, t)
		}
	}
	mode, named := "auto", ""
	if len(in.ToolChoice) > 0 && string(in.ToolChoice) != "null" {
		var s string
		var obj struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		switch {
		case json.Unmarshal(in.ToolChoice, &s) == nil:
			if s != "none" && s != "auto" && s != "required" {
				return nil, `tool_choice must be "none", "auto", "required" or a function`, "tool_choice"
			}
			mode = s
		case json.Unmarshal(in.ToolChoice, &obj) == nil && obj.Type == "function":
			mode, named = "function", obj.Function.Name
		}
	}
	var picked []mockTool
	switch mode {
	case "none":
		return nil, "", ""
	case "function":
		for _, t := range tools {
			if t.Function.Name == named {
				picked = []mockTool{t}
			}
		}
		if picked == nil {
			return nil, fmt.Sprintf("tool_choice names function %q, which is not in tools", named), "tool_choice"
		}
	case "required":
		if len(tools) == 0 {
			return nil, `tool_choice "required" needs function tools`, "tool_choice"
		}
		if picked = mentioned(tools, user); picked == nil {
			picked = tools[:1]
		}
	default:
		if answered {
			return nil, "", ""
		}
		picked = mentioned(tools, user)
	}
	if in.ParallelToolCalls != nil && !*in.ParallelToolCalls && len(picked) > 1 {
		picked = picked[:1]
	}
	for i, t := range picked {
		args := []byte("{}")
		// Arguments are a JSON object; parameters that are not an object
		// schema (or none) get the empty one.
		if v, ok := newSchemaGen(t.Function.Parameters, user).document().(*jsonObject); ok {
			args, _ = json.Marshal(v)
		}
		calls = append(calls, mockCall{id: toolCallID(in.Messages, t.Function.Name, i, 0), name: t.Function.Name, arguments: string(args)})
	}
	return calls, "", ""
}

// mentioned returns the tools whose names appear in text as whole words,
// in the order of their first appearance (tools order on ties).
func mentioned(tools []mockTool, text string) []mockTool {
	type hit struct {
		at   int
		tool mockTool
	}
	var hits []hit
	for _, t := range tools {
		if at := findWord(text, t.Function.Name, 0); at >= 0 {
			hits = append(hits, hit{at, t})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return a.at - b.at })
	var out []mockTool
	for _, h := range hits {
		out = append(out, h.tool)
	}
	return out
}

// toolCallID derives a call's id from the conversation (whitespace does not
// count: messages are re-encoded), the function, the call's position and
// the choice, and not from "stream": a streamed answer and a JSON one to
// the same conversation carry the same ids, and a new turn gets new ones.
func toolCallID(msgs []mockMessage, name string, call, choice int) string {
	b, _ := json.Marshal(msgs)
	h := sha256.New()
	h.Write(b)
	fmt.Fprintf(h, "\x00%s\x00%d\x00%d", name, call, choice)
	return "call_" + hex.EncodeToString(h.Sum(nil)[:12])
}

// fragments cuts s into pieces of at most size bytes, on rune boundaries.
func fragments(s string, size int) []string {
	var out []string
	for len(s) > size {
		n := size
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 {
			n = size
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
