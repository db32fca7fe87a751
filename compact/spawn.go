package compact

import (
	"fmt"
	"slices"
	"strings"
)

// Spawn is what a SPAWN_AGENT message (docs/agent-messaging.md, Spawning) asks
// for. After approval, Library.Extend(NewVerbs, NewTools) adds its definitions;
// ParseSpawn guarantees that this succeeds against the library that parsed it.
type Spawn struct {
	AgentName string // the instantiate step's tool position, e.g. "VISA_AGENT"
	// Verb and Tool are instantiate params "verb" and "tool"; Verb is the
	// verb's name when the message gave one of its aliases.
	Verb, Tool  string
	Description string // from the define step of that tool (or ctx.missing_capability when absent)
	// Inputs and Outputs come from the define step (params "inputs" and
	// "outputs"); when the tool is a library tool, from the library verb.
	Inputs, Outputs []string
	// NewTools holds the tool of the define step, if any:
	// {ID, Description, Interface, SupportedVerbs: [Verb]}.
	NewTools []Tool
	// NewVerbs holds Verb when the library does not know it yet:
	// {Name, Description, Inputs, Outputs: the first output}.
	NewVerbs          []Verb
	MissingCapability string // ctx.missing_capability
	// Endpoint is the instantiate params' optional "endpoint": where the new
	// agent receives messages ("" when absent). Whether it is an acceptable
	// URL is the registry's call.
	Endpoint string
}

// ParseSpawn validates a SPAWN_AGENT message and extracts the request. On top
// of Validate's rules it requires g == "SPAWN_AGENT" (else INVALID_FIELD),
// exactly one instantiate step, and no define step for a tool that the
// instantiate step does not use (both MALFORMED_PLAN): what an approver sees
// must be everything that gets registered. Other steps are validated but
// otherwise ignored.
func (l *Library) ParseSpawn(raw []byte) (*Spawn, Result) {
	msg, res := l.check(raw, false)
	if !res.Valid() {
		return nil, res
	}
	c := checker{lib: l, spawn: true}
	if key, g := goalOf(&msg); g.str != GoalSpawnAgent {
		return nil, c.fail(CodeInvalidField, key, `goal is %s, not %q`, clipQuote(g.str), GoalSpawnAgent)
	}
	sp := &Spawn{}
	if ctx := msg.get("ctx"); ctx != nil {
		if mc := ctx.get("missing_capability"); mc != nil {
			if mc.kind != kindString {
				return nil, c.fail(CodeInvalidField, "ctx.missing_capability", `"ctx.missing_capability" must be a string, got %s`, describe(mc))
			}
			sp.MissingCapability = mc.str
		}
	}

	plan := msg.get("plan")
	inst := -1
	for i := range plan.kids {
		if isMetaStep(&plan.kids[i], verbInstantiate) {
			if inst >= 0 {
				return nil, c.fail(CodeMalformedPlan, fmt.Sprintf("plan[%d]", i),
					"plan step %d: a %s message has exactly one instantiate step, and plan step %d is one already", i+1, GoalSpawnAgent, inst+1)
			}
			inst = i
		}
	}
	if inst < 0 {
		return nil, c.fail(CodeMalformedPlan, "plan", "a %s plan needs an instantiate step", GoalSpawnAgent)
	}
	step := plan.kids[inst].kids
	sp.AgentName = step[1].str
	// The verb by its name, also when the message used an alias: the spawned
	// agent's supported_verbs and tool are compared with plans by name.
	sp.Verb = l.canonical(step[2].get("verb").str)
	sp.Tool = step[2].get("tool").str
	if e := step[2].get("endpoint"); e != nil {
		if e.kind != kindString {
			return nil, c.fail(CodeInvalidParams, fmt.Sprintf("plan[%d][2].endpoint", inst), "plan step %d: endpoint must be a string URL", inst+1)
		}
		sp.Endpoint = e.str
	}

	defined := false
	for i := range plan.kids {
		st := &plan.kids[i]
		if !isMetaStep(st, verbDefine) {
			continue
		}
		lc := loc{step: i, branch: -1}
		if id := st.kids[1].str; id != sp.Tool {
			return nil, c.fail(CodeMalformedPlan, lc.path()+"[1]", "%s: tool %s is defined but the instantiate step uses %s",
				lc.label(), clipQuote(id), clipQuote(sp.Tool))
		}
		// Validate has checked these params, and rejected a second define
		// of the same tool.
		desc, iface, inputs, outputs, _ := c.defineParams(&st.kids[2], lc)
		sp.Description, sp.Inputs, sp.Outputs = desc, inputs, outputs
		sp.NewTools = []Tool{{ID: sp.Tool, Description: desc, Interface: iface, SupportedVerbs: []string{sp.Verb}}}
		defined = true
	}
	if ve := l.verb(sp.Verb); ve != nil {
		if !defined {
			sp.Inputs = slices.Clone(ve.def.Inputs)
			if ve.def.Outputs != "" {
				sp.Outputs = []string{ve.def.Outputs}
			}
		}
	} else {
		// Validate has made sure a new verb comes with a defined tool.
		nv := Verb{Name: sp.Verb, Description: sp.Description, Inputs: slices.Clone(sp.Inputs)}
		if len(sp.Outputs) > 0 {
			nv.Outputs = sp.Outputs[0]
		}
		sp.NewVerbs = []Verb{nv}
	}
	if sp.Description == "" {
		sp.Description = sp.MissingCapability
	}
	sp.detach()
	return sp, validResult()
}

// detach copies every string out of the parsed message: the parser's strings
// share one copy of the whole message, which a registered agent would
// otherwise keep alive for good.
func (sp *Spawn) detach() {
	sp.AgentName = strings.Clone(sp.AgentName)
	sp.Verb = strings.Clone(sp.Verb)
	sp.Tool = strings.Clone(sp.Tool)
	sp.Description = strings.Clone(sp.Description)
	sp.MissingCapability = strings.Clone(sp.MissingCapability)
	sp.Endpoint = strings.Clone(sp.Endpoint)
	cloneAll(sp.Inputs)
	cloneAll(sp.Outputs)
	for i := range sp.NewTools {
		t := &sp.NewTools[i]
		t.ID, t.Description, t.Interface = strings.Clone(t.ID), strings.Clone(t.Description), strings.Clone(t.Interface)
		cloneAll(t.SupportedVerbs)
	}
	for i := range sp.NewVerbs {
		v := &sp.NewVerbs[i]
		v.Name, v.Description, v.Outputs = strings.Clone(v.Name), strings.Clone(v.Description), strings.Clone(v.Outputs)
		cloneAll(v.Inputs)
	}
}

func cloneAll(list []string) {
	for i, s := range list {
		list[i] = strings.Clone(s)
	}
}

// isMetaStep reports whether st is a top-level define or instantiate step
// (Validate has checked its shape; meta steps never sit in parallel groups).
func isMetaStep(st *value, verb string) bool {
	return st.kind == kindArray && len(st.kids) == 3 && st.kids[0].kind == kindString && st.kids[0].str == verb
}
