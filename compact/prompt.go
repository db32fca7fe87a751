package compact

import (
	"slices"
	"strings"
)

// PromptAgent is the agent that Prompt describes.
type PromptAgent struct {
	Name         string
	Verbs, Tools []string
}

// Prompt fills compact SACP's agent prompt template. Two changes follow from
// how the gateway delivers messages: the SACP message is the user's message
// rather than part of the system prompt, and the instruction says what a
// machine-readable answer is (one JSON object, no prose or code fences) so
// that ValidateAnswer can check it.
//
// The output depends only on the set of verbs and tools, not their order or
// repetition. Names may come from a spawn request, so control characters
// (including newlines that could start a new prompt section) become spaces.
func Prompt(a PromptAgent) string {
	var b strings.Builder
	b.WriteString("You are an autonomous agent operating under the SACP protocol.\n\n")
	b.WriteString("### Agent Role: ")
	name := promptText(a.Name)
	if name == "" {
		name = "(unnamed)"
	}
	b.WriteString(name)
	b.WriteString("\n\n")
	b.WriteString("### Role Definition:\n" +
		"- You respond only to SACP-compliant messages.\n" +
		"- You only execute actions that include your assigned verb(s) and tool(s).\n" +
		"- All other messages must be rejected with an ERR response.\n" +
		"- You must follow the output format defined by `out_fmt`.\n\n")
	b.WriteString("### Supported Verb(s):\n")
	writeList(&b, a.Verbs)
	b.WriteString("\n### Supported Tool(s):\n")
	writeList(&b, a.Tools)
	b.WriteString("\n### Behavior:\n" +
		"- Validate the message structure.\n" +
		"- Parse and use relevant fields from `ctx` and `plan`.\n" +
		"- Return either a valid SACP output or a protocol-compliant error.\n\n")
	b.WriteString("### Message Input:\n" +
		"The SACP JSON message is the user's message.\n\n")
	b.WriteString("### Instruction:\n" +
		"Process this message strictly according to the rules of your defined role and the SACP protocol.\n" +
		"Answer with exactly one JSON object: a SACP message, or " +
		`{"status":"ERR","code":"<ERROR_CODE>","details":"<reason>"}` +
		". No prose and no code fences, unless the message's out_fmt is \"human\".\n")
	return b.String()
}

func writeList(b *strings.Builder, items []string) {
	list := make([]string, 0, len(items))
	for _, it := range items {
		if it = promptText(it); it != "" {
			list = append(list, it)
		}
	}
	slices.Sort(list)
	list = slices.Compact(list)
	if len(list) == 0 {
		b.WriteString("- (none)\n")
		return
	}
	for _, it := range list {
		b.WriteString("- ")
		b.WriteString(it)
		b.WriteByte('\n')
	}
}

// promptText replaces control characters with spaces and trims the result.
func promptText(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s))
}
