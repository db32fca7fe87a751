package compact

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The status of a Result, as compact SACP's validation answer names it.
const (
	StatusValid = "VALID"
	StatusErr   = "ERR"
)

// Error codes of a Result. MISSING_FIELD, MALFORMED_PLAN, UNKNOWN_VERB,
// UNKNOWN_TOOL, VERB_TOOL_MISMATCH and REQ_CLARIFY are named by compact SACP
// itself; the others split the protocol's single "malformed message" so that
// a client can tell a broken document from a bad field (the list is in
// docs/agent-messaging.md, Compact SACP).
const (
	CodeMalformedMessage = "MALFORMED_MESSAGE" // not JSON, not an object, duplicate key, too deep, a field under two keys (g and goal, case variants)
	CodeMissingField     = "MISSING_FIELD"     // g (goal) or plan absent
	CodeMalformedPlan    = "MALFORMED_PLAN"    // plan not an array; a step not [verb, tool, params]; bad parallel/join
	CodeInvalidField     = "INVALID_FIELD"     // wrong type/value of g, ctx, msg_id, state, reply_to, proto_ver, out_fmt, subtask, test_mode
	CodeInvalidParams    = "INVALID_PARAMS"    // params not an object, or a typed input of the wrong type
	CodeUnknownVerb      = "UNKNOWN_VERB"
	CodeUnknownTool      = "UNKNOWN_TOOL"
	CodeVerbToolMismatch = "VERB_TOOL_MISMATCH"
	CodeReqClarify       = "REQ_CLARIFY" // plan present but has no steps
)

// GoalSpawnAgent is the goal of a spawn request (docs/agent-messaging.md,
// Spawning), the only goal under which plans may use the define and instantiate
// verbs.
const GoalSpawnAgent = "SPAWN_AGENT"

// The values of compact SACP's optional fields (state and out_fmt).
var (
	states     = []string{"PENDING", "IN_PROGRESS", "DONE", "FAILED"}
	outFormats = []string{"human", "raw", "summary"}
)

// OutFmtRaw is the output format when a message names none (compact SACP's
// default).
const OutFmtRaw = "raw"

const (
	maxGoalLen     = 256
	maxIDLen       = 128
	maxProtoVerLen = 32
	// maxEcho bounds how much of an input value an error message repeats:
	// details are logged and shown to other agents, and must not become a
	// channel for the payload itself.
	maxEcho = 64
)

// Result is the validator's answer: {"status":"VALID"} or
// {"status":"ERR","code":...,"details":...,"path":...}.
type Result struct {
	Status string `json:"status"`
	Code   string `json:"code,omitempty"`
	// Details is one sentence naming the fault, e.g. "plan step 2: missing
	// parameters (want [verb, tool, params])"; steps are numbered from 1 as in
	// compact SACP's own error examples.
	Details string `json:"details,omitempty"`
	// Path is the JSON path of the fault, e.g. "plan[1][2]",
	// "plan[0].parallel[1][0]", "state", "subtask.g"; empty when the fault is
	// the document as a whole.
	Path string `json:"path,omitempty"`
}

// Valid reports whether r is a VALID result.
func (r Result) Valid() bool { return r.Status == StatusValid }

func validResult() Result { return Result{Status: StatusValid} }

// Validate checks a message an agent sends (POST /sacp/validate) against
// compact SACP's message rules and the library. It reports the first fault in a
// fixed order: the document, then g, plan's presence, the optional fields, the
// plan's steps in order, and finally subtask.
func (l *Library) Validate(raw []byte) Result {
	_, r := l.check(raw, false)
	return r
}

// PlanVerbs validates a message as Validate does and returns the verbs of its
// plan, parallel branches included, in order of first use and once each. A
// verb is given by its name also where the plan wrote an alias, so the list
// can be compared with supported_verbs lists (whether a recipient supports
// every verb of a plan); join, define and instantiate appear as written. The
// subtask's plan is left out: it is a message of its own. On an invalid
// message PlanVerbs returns nil and the fault.
func (l *Library) PlanVerbs(raw []byte) ([]string, Result) {
	msg, r := l.check(raw, false)
	if !r.Valid() {
		return nil, r
	}
	var verbs []string
	add := func(step *value) {
		// Cloned: the parser's strings share the whole message.
		if name := l.canonical(step.kids[0].str); !slices.Contains(verbs, name) {
			verbs = append(verbs, strings.Clone(name))
		}
	}
	plan := msg.get("plan")
	for i := range plan.kids {
		st := &plan.kids[i]
		if st.kind == kindArray {
			add(st)
			continue
		}
		par := st.val(0) // Validate has checked the group's shape
		for j := range par.kids {
			add(&par.kids[j])
		}
	}
	return verbs, r
}

// ValidateAnswer checks what a model or agent answered. Besides the messages
// Validate accepts, it accepts an ERR object
//
//	{"status":"ERR","code":"<non-empty string>","details":"<string, optional>"}
//
// (also allowed: msg_id, reply_to, and path as in Result), and a reply
// (reply_to set) whose state is DONE or FAILED may carry an empty plan because
// it reports a result rather than asking for work.
func (l *Library) ValidateAnswer(raw []byte) Result {
	_, r := l.check(raw, true)
	return r
}

// OutFormat returns the out_fmt of a message: "human", "raw" or "summary";
// "raw" when the field is absent, not one of those, or the message does not
// parse (compact SACP makes raw the default).
func OutFormat(raw []byte) string {
	v, err := parse(raw)
	if err != nil || v.kind != kindObject {
		return OutFmtRaw
	}
	if f := v.get("out_fmt"); f != nil && f.kind == kindString && oneOf(f.str, outFormats) {
		return f.str
	}
	return OutFmtRaw
}

// IsErrObject reports whether raw is a well-formed ERR object, one that
// ValidateAnswer accepts as such.
func IsErrObject(raw []byte) bool {
	v, err := parse(raw)
	if err != nil || v.kind != kindObject || v.get("status") == nil {
		return false
	}
	return checkErrObject(&v).Valid()
}

// check parses raw and validates it; answer selects ValidateAnswer's rules.
// It returns the parsed message for ParseSpawn.
func (l *Library) check(raw []byte, answer bool) (value, Result) {
	v, err := parse(raw)
	if err != nil {
		lead := "message is not valid JSON"
		if err.strict {
			lead = "message is refused"
		}
		return value{}, Result{Status: StatusErr, Code: CodeMalformedMessage,
			Details: fmt.Sprintf("%s: %s at byte %d", lead, err.msg, err.off)}
	}
	if v.kind != kindObject {
		return value{}, Result{Status: StatusErr, Code: CodeMalformedMessage,
			Details: "message is " + describeKind(v.kind) + ", not a JSON object"}
	}
	if answer && v.get("status") != nil {
		return v, checkErrObject(&v)
	}
	return v, l.checkMessage(&v, "", answer)
}

// kindNames name each kind of value in the messages of a refusal.
var kindNames = [...]string{kindNull: "null", kindBool: "a boolean", kindNumber: "a number", kindString: "a string", kindArray: "an array", kindObject: "an object"}

func describeKind(k kind) string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "an object"
}

// checker validates one message (the top level or a subtask).
type checker struct {
	lib *Library
	// prefix is the JSON path of the message: "" or "subtask.", "subtask.subtask.", ...
	prefix string
	spawn  bool
	// defined maps the tool ids introduced by define steps of a SPAWN_AGENT
	// plan to the index of the first step defining them.
	defined map[string]int
}

func (c *checker) fail(code, path, format string, args ...any) Result {
	d := fmt.Sprintf(format, args...)
	if c.prefix != "" {
		d = strings.TrimSuffix(c.prefix, ".") + ": " + d
	}
	return Result{Status: StatusErr, Code: code, Details: d, Path: c.prefix + path}
}

// messageFields are a message's fields by their lowercase form, both
// spellings of the goal included.
var messageFields = map[string]string{"g": "g", "goal": "goal", "plan": "plan", "status": "status", "msg_id": "msg_id", "reply_to": "reply_to",
	"state": "state", "proto_ver": "proto_ver", "out_fmt": "out_fmt", "ctx": "ctx", "test_mode": "test_mode", "subtask": "subtask"}

// longNames maps the long name of each field compact SACP abbreviates to the
// abbreviation. Of its components (GOAL, CTX, PLAN, ACT, OUT_FMT, STATE,
// MSG_ID, REPLY_TO) only the goal has a short key, "g"; ACT is a plan step,
// not a field. A message may spell such a field either way but not both: a
// reader that knows one spelling would otherwise see another goal than a
// reader that knows the other.
var longNames = map[string]string{"goal": "g"}

// shortName returns the key a message field is checked under: the
// abbreviation for a long name, key itself otherwise.
func shortName(key string) string {
	if s, ok := longNames[key]; ok {
		return s
	}
	return key
}

// goalOf returns the goal of a message and the key it was given under ("g"
// or "goal"); nil when there is none.
func goalOf(msg *value) (string, *value) {
	for i := range msg.members() {
		if m := msg.member(i); shortName(m.key) == "g" {
			return m.key, m.val
		}
	}
	return "g", nil
}

// checkMessage validates a message object. answer allows the empty plan of a
// DONE/FAILED reply; it applies to the top level only.
func (l *Library) checkMessage(msg *value, prefix string, answer bool) Result {
	c := checker{lib: l, prefix: prefix}
	f, r := c.readFields(msg)
	if !r.Valid() {
		return r
	}
	if f.status != nil {
		return c.fail(CodeInvalidField, "status", `"status" is only allowed in an ERR object`)
	}
	g, gKey := f.g, f.gKey
	if g == nil {
		return c.fail(CodeMissingField, "g", `message has no "g" (or "goal")`)
	}
	if g.kind != kindString || g.str == "" || len(g.str) > maxGoalLen {
		got := describe(g)
		if g.kind == kindString && len(g.str) > maxGoalLen {
			got = fmt.Sprintf("%d bytes", len(g.str))
		}
		return c.fail(CodeInvalidField, gKey, `%q must be a non-empty string of at most %d bytes, got %s`, gKey, maxGoalLen, got)
	}
	plan := f.plan
	if plan == nil {
		return c.fail(CodeMissingField, "plan", `message has no "plan"`)
	}
	if r := c.checkOptional(&f); !r.Valid() {
		return r
	}

	if plan.kind != kindArray {
		return c.fail(CodeMalformedPlan, "plan", `"plan" must be an array of steps, got %s`, describe(plan))
	}
	if len(plan.kids) == 0 {
		reportsResult := answer && f.replyTo != nil && f.state != nil && (f.state.str == "DONE" || f.state.str == "FAILED")
		if !reportsResult {
			return c.fail(CodeReqClarify, "plan", "plan has no steps")
		}
	}
	c.spawn = g.str == GoalSpawnAgent
	if r := c.checkPlan(plan); !r.Valid() {
		return r
	}

	if subtask := f.subtask; subtask != nil {
		if subtask.kind != kindObject {
			return c.fail(CodeInvalidField, "subtask", `"subtask" must be a message object, got %s`, describe(subtask))
		}
		return l.checkMessage(subtask, prefix+"subtask.", false)
	}
	return validResult()
}

// message is a message's fields as read; nil is absent.
type message struct {
	g, plan, status, msgID, replyTo, state, protoVer, outFmt, ctx, testMode, subtask *value
	gKey                                                                             string // the key of the goal ("g" or "goal"), for paths and details
}

// readFields sorts a message's members into its fields, refusing the goal
// under both its keys and a key that differs from a field only by case.
func (c *checker) readFields(msg *value) (message, Result) {
	f := message{gKey: "g"}
	slots := [...]slot{{"plan", &f.plan}, {"status", &f.status}, {"msg_id", &f.msgID}, {"reply_to", &f.replyTo}, {"state", &f.state},
		{"proto_ver", &f.protoVer}, {"out_fmt", &f.outFmt}, {"ctx", &f.ctx}, {"test_mode", &f.testMode}, {"subtask", &f.subtask}}
	for i := range msg.members() {
		m := msg.member(i)
		name := shortName(m.key)
		switch {
		case name == "g":
			if f.g != nil {
				// The parser has refused a repeated key, so this is the
				// other spelling.
				return f, c.fail(CodeMalformedMessage, m.key, "%q and %q are the same field (the goal): a message has one of them", f.gKey, m.key)
			}
			f.g, f.gKey = m.val, m.key
		case fill(slots[:], name, m.val):
		default:
			// Read once, as every reader will: a key that differs from a
			// field only by case ("G" beside "g") would be that field to a
			// case-insensitive recipient, and something else here.
			if name, ok := messageFields[strings.ToLower(m.key)]; ok {
				return f, c.fail(CodeMalformedMessage, m.key, "the key %q differs from the field %q only by case", m.key, name)
			}
		}
	}
	return f, validResult()
}

// slot is where the member named name goes as a message or an ERR
// object is read.
type slot struct {
	name string
	to   **value
}

// fill puts v into the slot named name; false when none is.
func fill(slots []slot, name string, v *value) bool {
	for _, s := range slots {
		if s.name == name {
			*s.to = v
			return true
		}
	}
	return false
}

// checkOptional checks the optional fields a message has: msg_id,
// reply_to, state, proto_ver, out_fmt, ctx and test_mode.
func (c *checker) checkOptional(f *message) Result {
	if r := c.checkID("msg_id", f.msgID); !r.Valid() {
		return r
	}
	if r := c.checkID("reply_to", f.replyTo); !r.Valid() {
		return r
	}
	if state := f.state; state != nil && (state.kind != kindString || !oneOf(state.str, states)) {
		return c.fail(CodeInvalidField, "state", `"state" must be one of PENDING, IN_PROGRESS, DONE, FAILED, got %s`, describe(state))
	}
	if protoVer := f.protoVer; protoVer != nil && (protoVer.kind != kindString || !isProtoVer(protoVer.str)) {
		return c.fail(CodeInvalidField, "proto_ver", `"proto_ver" must be a version such as "0.1" (digits and dots), got %s`, describe(protoVer))
	}
	if outFmt := f.outFmt; outFmt != nil && (outFmt.kind != kindString || !oneOf(outFmt.str, outFormats)) {
		return c.fail(CodeInvalidField, "out_fmt", `"out_fmt" must be one of human, raw, summary, got %s`, describe(outFmt))
	}
	if ctx := f.ctx; ctx != nil && ctx.kind != kindObject {
		return c.fail(CodeInvalidField, "ctx", `"ctx" must be an object, got %s`, describe(ctx))
	}
	if testMode := f.testMode; testMode != nil && testMode.kind != kindBool {
		return c.fail(CodeInvalidField, "test_mode", `"test_mode" must be a boolean, got %s`, describe(testMode))
	}
	return validResult()
}

// checkID checks msg_id or reply_to when present.
func (c *checker) checkID(name string, v *value) Result {
	if v == nil || (v.kind == kindString && isID(v.str)) {
		return validResult()
	}
	return c.fail(CodeInvalidField, name, "%q must be 1-%d characters of A-Z a-z 0-9 . _ : -, got %s", name, maxIDLen, describe(v))
}

func isID(s string) bool {
	if s == "" || len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// isProtoVer accepts dot-separated decimal numbers: "0.1", "1", "1.2.3".
func isProtoVer(s string) bool {
	if s == "" || len(s) > maxProtoVerLen {
		return false
	}
	for part := range strings.SplitSeq(s, ".") {
		if part == "" {
			return false
		}
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return false
			}
		}
	}
	return true
}

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

// checkErrObject checks a compact SACP ERR object in a fixed order:
// status, code, details, path, msg_id, reply_to, then unexpected keys.
func checkErrObject(obj *value) Result {
	c := checker{}
	var status, code, details, path, msgID, replyTo, extra *value
	slots := [...]slot{{"status", &status}, {"code", &code}, {"details", &details}, {"path", &path}, {"msg_id", &msgID}, {"reply_to", &replyTo}}
	extraKey := ""
	for i := range obj.members() {
		m := obj.member(i)
		if !fill(slots[:], m.key, m.val) && extra == nil {
			extra, extraKey = m.val, m.key
		}
	}
	if status == nil || status.kind != kindString || status.str != StatusErr {
		return c.fail(CodeInvalidField, "status", `an answer with "status" must be an ERR object ("status": "ERR"), got %s`, describeOrNothing(status))
	}
	if code == nil || code.kind != kindString || code.str == "" {
		return c.fail(CodeInvalidField, "code", `ERR object needs "code", a non-empty string, got %s`, describeOrNothing(code))
	}
	if details != nil && details.kind != kindString {
		return c.fail(CodeInvalidField, "details", `ERR object "details" must be a string, got %s`, describe(details))
	}
	if path != nil && path.kind != kindString {
		return c.fail(CodeInvalidField, "path", `ERR object "path" must be a string, got %s`, describe(path))
	}
	if r := c.checkID("msg_id", msgID); !r.Valid() {
		return r
	}
	if r := c.checkID("reply_to", replyTo); !r.Valid() {
		return r
	}
	if extra != nil {
		return c.fail(CodeInvalidField, clip(extraKey), "ERR object has unexpected key %s", clipQuote(extraKey))
	}
	return validResult()
}

// describeOrNothing describes v, or says it is absent.
func describeOrNothing(v *value) string {
	if v == nil {
		return "nothing"
	}
	return describe(v)
}

// clip cuts s to at most maxEcho bytes on a rune boundary.
func clip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	cut := maxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// clipQuote quotes at most maxEcho bytes of s, marking a cut with "...".
func clipQuote(s string) string {
	c := clip(s)
	if len(c) < len(s) {
		return strconv.Quote(c) + "..."
	}
	return strconv.Quote(s)
}
