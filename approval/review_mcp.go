package approval

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/sacpgw/gateway/internal/escalation"
	sj "github.com/sacpgw/gateway/internal/strictjson"
)

// mcpContentShape is an MCP_TOOL_CALL escalation's Content
// (escalation.MCPCall), which the MCP front door writes.
var mcpContentShape = sj.FromStruct(reflect.TypeFor[escalation.MCPCall]())

// mcpReview is a tool call as the review page shows it, above the raw
// content: what will run where, what the server says the tool does, and
// the arguments (redacted by the door before the escalation was opened).
type mcpReview struct {
	Server, Tool, Description string
	// Title is the annotations' title, when the server gave one.
	Title       string
	Annotations []mcpHint
	// Arguments are the call's top-level arguments in name order, each
	// value as indented JSON (a string keeps its quotes, so "1" and 1
	// differ on the page as they do for the tool).
	Arguments       []mcpArgument
	ArgumentsSHA256 string
	// Meta is the call's _meta as indented JSON ("" when it has none).
	Meta string
	// Grant says what the approval lets through, and until when.
	Grant string
	// Via is the virtual server the agent called through ("" for none).
	Via string
	// Held is set when the agent's call waits open for the decision.
	Held *mcpHeld
}

// mcpHeld is a held call's wait as the page shows it: who waits, until
// when, and (set when the page is drawn) whether it still waits and how
// long is left.
type mcpHeld struct {
	Until   time.Time
	Behalf  string
	Waiting bool
	Left    string
}

// mcpHint is one annotation: its value as the server stated it, or a note
// with MCP's default when it stated none. Warn flags a tool the server
// itself calls destructive.
type mcpHint struct {
	Name, Value, Note string
	Stated, Warn      bool
}

type mcpArgument struct {
	Name, Value string
}

type mcpHintDef struct{ name, def string }

// mcpHints are the MCP tool annotations a reviewer weighs (MCP
// specification, ToolAnnotations), with the default a client must assume
// when the server leaves one out. They are always listed, so that a hint
// the server did not state reads as such, not as false.
var mcpHints = []mcpHintDef{
	{"destructiveHint", "true (when not read-only)"},
	{"readOnlyHint", "false"},
	{"idempotentHint", "false"},
	{"openWorldHint", "true"},
}

// parseMCPContent reads an MCP_TOOL_CALL escalation's content strictly, as
// the door reads it back when a person decides (readReview): no member
// the door does not write, none named twice or in another case, the
// method tools/call, a server, a tool and the arguments' SHA-256, the
// annotations and arguments as objects. Anything else is not shown as a
// tool call (an error): the page then shows the raw content only, so a
// reviewer never sees a summary that differs from what the decision binds.
func parseMCPContent(content string) (*mcpReview, error) {
	if err := sj.Check([]byte(content), mcpContentShape); err != nil {
		return nil, err
	}
	var c escalation.MCPCall
	dec := json.NewDecoder(bytes.NewReader([]byte(content)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	if c.Method != "tools/call" || c.Server == "" || c.Tool == "" {
		return nil, errors.New("not a tools/call of a named server and tool")
	}
	if len(c.ArgumentsSHA256) != 64 {
		return nil, errors.New("arguments_sha256 is not 64 hex digits")
	}
	if _, err := hex.DecodeString(c.ArgumentsSHA256); err != nil {
		return nil, errors.New("arguments_sha256 is not 64 hex digits")
	}
	if len(c.Meta) > 0 && c.Meta[0] != '{' {
		return nil, errors.New("meta: not a JSON object")
	}
	var ann, args map[string]json.RawMessage
	if err := jsonObject(json.RawMessage(c.Annotations), &ann); err != nil {
		return nil, errors.New("annotations: " + err.Error())
	}
	if err := jsonObject(json.RawMessage(c.Arguments), &args); err != nil {
		return nil, errors.New("arguments: " + err.Error())
	}
	r := &mcpReview{Server: c.Server, Tool: c.Tool, Description: c.Description, ArgumentsSHA256: c.ArgumentsSHA256, Meta: indentJSON(json.RawMessage(c.Meta)), Via: c.Via}
	if c.Held != nil {
		until, err := time.Parse(time.RFC3339, c.Held.Until)
		if err != nil {
			return nil, errors.New("held.until: not an RFC 3339 time")
		}
		r.Held = &mcpHeld{Until: until, Behalf: c.Held.Behalf}
	}
	if raw, ok := ann["title"]; ok {
		if json.Unmarshal(raw, &r.Title) != nil {
			r.Title = string(raw)
		}
	}
	for _, h := range mcpHints {
		raw, ok := ann[h.name]
		if !ok {
			r.Annotations = append(r.Annotations, mcpHint{Name: h.name, Value: "not stated", Note: "MCP's default: " + h.def})
			continue
		}
		r.Annotations = append(r.Annotations, mcpHint{Name: h.name, Value: string(raw), Stated: true,
			Warn: h.name == "destructiveHint" && string(raw) == "true"})
	}
	// Annotations MCP may add later, or a server's own: shown as given.
	for _, name := range sortedKeys(ann) {
		if name == "title" || slices.ContainsFunc(mcpHints, func(h mcpHintDef) bool { return h.name == name }) {
			continue
		}
		r.Annotations = append(r.Annotations, mcpHint{Name: name, Value: string(ann[name]), Stated: true})
	}
	for _, name := range sortedKeys(args) {
		r.Arguments = append(r.Arguments, mcpArgument{Name: name, Value: indentJSON(args[name])})
	}
	return r, nil
}

// jsonObject reads raw, which must be present and a JSON object, into m
// (the strict check above has refused duplicate names already).
func jsonObject(raw json.RawMessage, m *map[string]json.RawMessage) error {
	if len(raw) == 0 || raw[0] != '{' {
		return errors.New("not a JSON object")
	}
	return json.Unmarshal(raw, m)
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// mcpGrant says what an approval of rec lets through: the door grants
// exactly the reviewed call (the same agent, server, tool and SHA-256 of
// the arguments), once, for protocol.timeouts.escalation from the
// decision (mcp/grants.go, Resolve).
func mcpGrant(rec *Record, ttl time.Duration) string {
	what := "exactly this call (agent " + rec.AgentID + ", the same tool, the same arguments and _meta) through once"
	switch {
	case rec.State == StateEscalated:
		return "Approving lets " + what + ", if the agent sends it again within " + span(ttl) +
			" of the approval. A call with any other argument or _meta is another call and needs its own approval."
	case rec.State == StateApproved && rec.Escalation != nil && rec.Escalation.Review != nil:
		return "The approval lets " + what + ", until " + rec.Escalation.Review.At.Add(ttl).UTC().Format("2006-01-02 15:04:05 UTC") +
			". A call with any other argument or _meta needs its own approval."
	}
	return "Nothing was approved: this call does not run."
}

// mcpOutcomes are the words beside the buttons for a tool call.
func mcpOutcomes() (approve, reject string) {
	return "this exact call may run once when the agent sends it again (APPROVED)", "it does not run (REJECTED); the agent is told"
}

// heldNow says, at now, whether the agent still waits for r's decision:
// then approving runs the call at once and its result goes to the
// waiting agent, which the grant line and the buttons' words say.
func (r *mcpReview) heldNow(rec *Record, now time.Time) (approve, reject string, held bool) {
	if r.Held == nil || rec.State != StateEscalated || !now.Before(r.Held.Until) {
		return "", "", false
	}
	r.Held.Waiting = true
	r.Held.Left = heldLeft(r.Held.Until.Sub(now))
	r.Grant = "Approving runs exactly this call (agent " + rec.AgentID + ", the same tool, the same arguments and _meta) once, now, " +
		"and its result goes to the waiting agent. A call with any other argument or _meta needs its own approval."
	return "the call runs now and its result goes to the waiting agent (APPROVED)", "it does not run (REJECTED); the waiting agent is told at once", true
}

// heldLeft is how long a held call still waits, to the second under a
// minute (holds are short).
func heldLeft(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%d s", int(d.Round(time.Second)/time.Second))
	}
	return span(d)
}
