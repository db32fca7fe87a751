package compact

import (
	"fmt"
	"strconv"
	"strings"
)

// The checks of a message's plan: its steps and parallel branches, the
// verbs and tools they name, their params, joins, and the define and
// instantiate steps of a spawn.

// loc is the position of a step: plan[step], or plan[step].parallel[branch]
// when branch >= 0. Paths and labels are built only for errors.
type loc struct{ step, branch int }

func (l loc) path() string {
	if l.branch < 0 {
		return fmt.Sprintf("plan[%d]", l.step)
	}
	return fmt.Sprintf("plan[%d].parallel[%d]", l.step, l.branch)
}

func (l loc) label() string {
	if l.branch < 0 {
		return fmt.Sprintf("plan step %d", l.step+1)
	}
	return fmt.Sprintf("plan step %d, parallel branch %d", l.step+1, l.branch+1)
}

func (c *checker) checkPlan(plan *value) Result {
	if c.spawn {
		c.collectDefines(plan)
	}
	afterParallel := false
	for i := range plan.kids {
		st := &plan.kids[i]
		lc := loc{step: i, branch: -1}
		switch st.kind {
		case kindArray:
			if r := c.checkStep(st, lc, afterParallel); !r.Valid() {
				return r
			}
			afterParallel = false
		case kindObject:
			if r := c.checkParallel(st, i); !r.Valid() {
				return r
			}
			afterParallel = true
		default:
			return c.fail(CodeMalformedPlan, lc.path(), `%s: got %s (want [verb, tool, params] or {"parallel": [...]})`, lc.label(), describe(st))
		}
	}
	return validResult()
}

// collectDefines records the tools a SPAWN_AGENT plan defines, so that an
// instantiate step may name a tool defined by a later step.
func (c *checker) collectDefines(plan *value) {
	for i := range plan.kids {
		st := &plan.kids[i]
		if st.kind != kindArray || len(st.kids) < 2 || st.kids[0].kind != kindString || st.kids[0].str != verbDefine ||
			st.kids[1].kind != kindString || st.kids[1].str == "" {
			continue
		}
		if c.defined == nil {
			c.defined = make(map[string]int)
		}
		if _, ok := c.defined[st.kids[1].str]; !ok {
			c.defined[st.kids[1].str] = i
		}
	}
}

func (c *checker) checkParallel(st *value, i int) Result {
	lc := loc{step: i, branch: -1}
	if st.members() != 1 || st.key(0) != "parallel" {
		return c.fail(CodeMalformedPlan, lc.path(), `%s: an object step must be {"parallel": [step, ...]} with no other keys`, lc.label())
	}
	par := st.val(0)
	if par.kind != kindArray {
		return c.fail(CodeMalformedPlan, lc.path()+".parallel", `%s: "parallel" must be an array of steps, got %s`, lc.label(), describe(par))
	}
	if len(par.kids) < 2 {
		return c.fail(CodeMalformedPlan, lc.path()+".parallel", "%s: a parallel group needs at least 2 steps, got %d", lc.label(), len(par.kids))
	}
	for j := range par.kids {
		br := &par.kids[j]
		blc := loc{step: i, branch: j}
		switch {
		case br.kind == kindArray:
			if r := c.checkStep(br, blc, false); !r.Valid() {
				return r
			}
		case br.kind == kindObject && br.get("parallel") != nil:
			return c.fail(CodeMalformedPlan, blc.path(), "%s: parallel groups cannot be nested", blc.label())
		default:
			return c.fail(CodeMalformedPlan, blc.path(), "%s: got %s (want [verb, tool, params])", blc.label(), describe(br))
		}
	}
	return validResult()
}

// checkStep checks a [verb, tool, params] step: its shape first, then the
// verb, the tool, the pair, and the parameter types.
func (c *checker) checkStep(st *value, lc loc, afterParallel bool) Result {
	switch n := len(st.kids); {
	case n == 0:
		return c.fail(CodeMalformedPlan, lc.path(), "%s: empty step (want [verb, tool, params])", lc.label())
	case n == 1:
		return c.fail(CodeMalformedPlan, lc.path()+"[1]", "%s: missing tool and parameters (want [verb, tool, params])", lc.label())
	case n == 2:
		return c.fail(CodeMalformedPlan, lc.path()+"[2]", "%s: missing parameters (want [verb, tool, params])", lc.label())
	case n > 3:
		return c.fail(CodeMalformedPlan, lc.path()+"[3]", "%s: %d elements (want [verb, tool, params])", lc.label(), n)
	}
	verb, tool, params := &st.kids[0], &st.kids[1], &st.kids[2]
	if verb.kind != kindString || verb.str == "" {
		return c.fail(CodeMalformedPlan, lc.path()+"[0]", "%s: verb must be a non-empty string, got %s", lc.label(), describe(verb))
	}
	if tool.kind != kindString || tool.str == "" {
		return c.fail(CodeMalformedPlan, lc.path()+"[1]", "%s: tool must be a non-empty string, got %s", lc.label(), describe(tool))
	}
	if params.kind != kindObject {
		return c.fail(CodeInvalidParams, lc.path()+"[2]", "%s: params must be an object, got %s", lc.label(), describe(params))
	}

	// Every check below is of the verb the step names, whichever of its
	// names it uses; aliases cannot be join, define or instantiate.
	name := c.lib.canonical(verb.str)
	switch name {
	case verbJoin:
		return c.checkJoin(verb.str, tool.str, params, lc, afterParallel)
	case verbDefine, verbInstantiate:
		if !c.spawn {
			return c.fail(CodeUnknownVerb, lc.path()+"[0]", "%s: verb %q is only allowed in a %s message", lc.label(), verb.str, GoalSpawnAgent)
		}
		if lc.branch >= 0 {
			return c.fail(CodeMalformedPlan, lc.path()+"[0]", "%s: a %s step cannot run in a parallel group", lc.label(), verb.str)
		}
		if verb.str == verbDefine {
			return c.checkDefine(tool.str, params, lc)
		}
		return c.checkInstantiate(params, lc)
	}

	ve := c.lib.verb(name)
	if ve == nil {
		return c.fail(CodeUnknownVerb, lc.path()+"[0]", "%s: unknown verb %s", lc.label(), clipQuote(verb.str))
	}
	te := c.lib.tool(tool.str)
	if te == nil {
		return c.fail(CodeUnknownTool, lc.path()+"[1]", "%s: unknown tool %s", lc.label(), clipQuote(tool.str))
	}
	if !te.supports(name) {
		return c.fail(CodeVerbToolMismatch, lc.path()+"[1]", "%s: tool %s does not support verb %s%s", lc.label(), clipQuote(tool.str), clipQuote(name), written(name, verb.str))
	}
	return c.checkParams(ve, params, lc)
}

// written notes the alias a step used when an error names the verb by its
// name, so that the author can find the step: ` (written "s")`.
func written(name, as string) string {
	if name == as {
		return ""
	}
	return " (written " + clipQuote(as) + ")"
}

// checkJoin checks a join step. join needs no definition; its tool is checked
// only once the library has tools that support join, so that libraries
// written before anyone thought about joins accept compact SACP's own
// example. as is the verb as the step wrote it: "join" or an alias of it.
func (c *checker) checkJoin(as, tool string, params *value, lc loc, afterParallel bool) Result {
	if !afterParallel {
		return c.fail(CodeMalformedPlan, lc.path()+"[0]", "%s: join must directly follow a parallel group", lc.label())
	}
	if c.lib.hasJoinTools() {
		te := c.lib.tool(tool)
		if te == nil {
			return c.fail(CodeUnknownTool, lc.path()+"[1]", "%s: unknown tool %s", lc.label(), clipQuote(tool))
		}
		if !te.supports(verbJoin) {
			return c.fail(CodeVerbToolMismatch, lc.path()+"[1]", "%s: tool %s does not support verb %q%s", lc.label(), clipQuote(tool), verbJoin, written(verbJoin, as))
		}
	}
	if ve := c.lib.verb(verbJoin); ve != nil {
		return c.checkParams(ve, params, lc)
	}
	return validResult()
}

// checkParams checks the parameters that the verb declares with a type.
func (c *checker) checkParams(ve *verbEntry, params *value, lc loc) Result {
	if len(ve.typed) == 0 {
		return validResult()
	}
	for i := range params.members() {
		m := params.member(i)
		t, ok := ve.typed[m.key]
		if !ok || hasType(m.val, t) {
			continue
		}
		// m.key equals a declared input name, so the path echoes the
		// library, not the message.
		return c.fail(CodeInvalidParams, lc.path()+"[2]."+m.key, "%s: param %q must be %s, got %s", lc.label(), m.key, articled(t), describe(m.val))
	}
	return validResult()
}

func articled(t inputType) string {
	switch t {
	case typeArray, typeObject, typeInteger:
		return "an " + t.String()
	default:
		return "a " + t.String()
	}
}

func hasType(v *value, t inputType) bool {
	switch t {
	case typeString:
		return v.kind == kindString
	case typeNumber:
		return v.kind == kindNumber
	case typeInteger:
		return v.kind == kindNumber && isIntegral(v.str)
	case typeBoolean:
		return v.kind == kindBool
	case typeArray:
		return v.kind == kindArray
	case typeObject:
		return v.kind == kindObject
	default:
		return true
	}
}

// isIntegral reports whether a JSON number literal denotes an integer, exactly
// (so 1.0, 1.5e1 and 150e-1 are integers, 1e-400 is not), without converting
// to float64 and without rounding.
func isIntegral(lit string) bool {
	mant, expPart, _ := strings.Cut(strings.ToLower(lit), "e")
	mant = strings.TrimPrefix(mant, "-")
	intPart, frac, _ := strings.Cut(mant, ".")
	frac = strings.TrimRight(frac, "0")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return true // zero
	}
	exp := 0
	if expPart != "" {
		neg := expPart[0] == '-'
		expPart = strings.TrimLeft(expPart, "+-")
		expPart = strings.TrimLeft(expPart, "0")
		if len(expPart) > 9 {
			expPart = "999999999" // only the sign matters at this size
		}
		if expPart != "" {
			exp, _ = strconv.Atoi(expPart)
		}
		if neg {
			exp = -exp
		}
	}
	// value = digits × 10^(exp - len(frac)); trailing zeros of digits count
	// towards the exponent.
	trailing := len(digits) - len(strings.TrimRight(digits, "0"))
	return exp-len(frac)+trailing >= 0
}

// checkDefine checks a define step of a SPAWN_AGENT plan: it introduces the
// tool in its tool position, described by its params.
func (c *checker) checkDefine(tool string, params *value, lc loc) Result {
	if c.lib.tool(tool) != nil {
		return c.fail(CodeMalformedPlan, lc.path()+"[1]", "%s: define names tool %s, which already exists", lc.label(), clipQuote(tool))
	}
	if first, ok := c.defined[tool]; ok && first != lc.step {
		return c.fail(CodeMalformedPlan, lc.path()+"[1]", "%s: tool %s is already defined in plan step %d", lc.label(), clipQuote(tool), first+1)
	}
	_, _, _, _, r := c.defineParams(params, lc)
	return r
}

// defineParams reads and checks the params of a define step: description and
// interface are strings, inputs are input declarations as in Verb.Inputs (so
// that the spawned verb can join the library), outputs are non-empty strings.
// Other keys are allowed, as everywhere in params.
func (c *checker) defineParams(params *value, lc loc) (desc, iface string, inputs, outputs []string, r Result) {
	for i := range params.members() {
		m := params.member(i)
		switch m.key {
		case "description", "interface":
			if m.val.kind != kindString {
				return "", "", nil, nil, c.fail(CodeInvalidParams, lc.path()+"[2]."+m.key, "%s: %q must be a string, got %s", lc.label(), m.key, describe(m.val))
			}
			if m.key == "description" {
				desc = m.val.str
			} else {
				iface = m.val.str
			}
		case "inputs", "outputs":
			list, r := c.stringList(m.val, m.key, lc)
			if !r.Valid() {
				return "", "", nil, nil, r
			}
			if m.key == "outputs" {
				outputs = list
				continue
			}
			seen := make(map[string]bool, len(list))
			for k, d := range list {
				name, _, err := parseInput(d)
				if err == nil && seen[name] {
					err = fmt.Errorf("duplicate name %s", clipQuote(name))
				}
				if err != nil {
					return "", "", nil, nil, c.fail(CodeInvalidParams, fmt.Sprintf("%s[2].inputs[%d]", lc.path(), k),
						`%s: input %s is not "name" or "name:type" with a known type`, lc.label(), clipQuote(d))
				}
				seen[name] = true
			}
			inputs = list
		}
	}
	return desc, iface, inputs, outputs, validResult()
}

func (c *checker) stringList(v *value, key string, lc loc) ([]string, Result) {
	if v.kind != kindArray {
		return nil, c.fail(CodeInvalidParams, lc.path()+"[2]."+key, "%s: %q must be an array of strings, got %s", lc.label(), key, describe(v))
	}
	list := make([]string, 0, len(v.kids))
	for k := range v.kids {
		e := &v.kids[k]
		if e.kind != kindString || e.str == "" {
			return nil, c.fail(CodeInvalidParams, fmt.Sprintf("%s[2].%s[%d]", lc.path(), key, k),
				"%s: %q must hold non-empty strings, got %s", lc.label(), key, describe(e))
		}
		list = append(list, e.str)
	}
	return list, validResult()
}

// checkInstantiate checks an instantiate step of a SPAWN_AGENT plan: its tool
// position names the new agent, and params "verb" and "tool" say what the
// agent does. The tool must be defined by the message or be a library tool
// that already supports the verb (an existing tool cannot gain verbs).
func (c *checker) checkInstantiate(params *value, lc loc) Result {
	verb, r := c.nameParam(params, "verb", lc)
	if !r.Valid() {
		return r
	}
	tool, r := c.nameParam(params, "tool", lc)
	if !r.Valid() {
		return r
	}
	// The new agent supports the verb, not the alias: its registry entry
	// is compared with plans' verbs by name (ParseSpawn does the same).
	name := c.lib.canonical(verb)
	if name == verbJoin || name == verbDefine || name == verbInstantiate {
		return c.fail(CodeInvalidParams, lc.path()+"[2].verb", "%s: cannot instantiate an agent for the reserved verb %q", lc.label(), name)
	}
	if _, ok := c.defined[tool]; ok {
		return validResult()
	}
	te := c.lib.tool(tool)
	if te == nil {
		return c.fail(CodeUnknownTool, lc.path()+"[2].tool", "%s: tool %s is neither in the library nor defined by this message", lc.label(), clipQuote(tool))
	}
	if !te.supports(name) {
		return c.fail(CodeVerbToolMismatch, lc.path()+"[2].verb", "%s: tool %s does not support verb %s%s", lc.label(), clipQuote(tool), clipQuote(name), written(name, verb))
	}
	return validResult()
}

func (c *checker) nameParam(params *value, key string, lc loc) (string, Result) {
	v := params.get(key)
	if v == nil || v.kind != kindString || v.str == "" {
		got := "nothing"
		if v != nil {
			got = describe(v)
		}
		return "", c.fail(CodeInvalidParams, lc.path()+"[2]."+key, "%s: instantiate needs %q, a non-empty string, got %s", lc.label(), key, got)
	}
	return v.str, validResult()
}
