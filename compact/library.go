package compact

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Verb is a verb definition of compact SACP's library (config/registry.yaml).
//
// An input is declared as "name" or "name:type", where type is one of string,
// number, integer, boolean, array, object or any. Validate checks a typed
// parameter when a plan step supplies it; an untyped or "any" input, a missing
// input and an undeclared parameter are all accepted, because compact SACP
// lets agents abbreviate keys and does not say which inputs are required.
//
// Aliases are other names of the verb in plans, such as compact SACP's own
// "s" for search. They exist for messages only: a tool's SupportedVerbs names
// the verb itself, so that a verb has one spelling everywhere the library
// and the agents' registry entries are compared.
type Verb struct {
	Name        string   `json:"name"`
	Aliases     []string `json:"aliases,omitempty"`
	Description string   `json:"description"`
	Inputs      []string `json:"inputs"`
	Outputs     string   `json:"outputs"`
}

// Tool is a tool definition of compact SACP's library (config/registry.yaml).
type Tool struct {
	ID             string   `json:"id"`
	Description    string   `json:"description"`
	Interface      string   `json:"interface,omitempty"`
	SupportedVerbs []string `json:"supported_verbs"`
}

// The verbs that plans may use without a definition. join is structural
// (it closes a parallel group); define and instantiate are the meta verbs of
// SPAWN_AGENT messages. A library may define "join" to give it typed inputs
// and may list it in a tool's supported verbs; it may not define the meta
// verbs, so that a meta step always means the same thing.
const (
	verbJoin        = "join"
	verbDefine      = "define"
	verbInstantiate = "instantiate"
)

// inputType is the declared JSON type of a verb input.
type inputType uint8

const (
	typeAny inputType = iota
	typeString
	typeNumber
	typeInteger
	typeBoolean
	typeArray
	typeObject
)

var inputTypeNames = [...]string{
	typeAny:     "any",
	typeString:  "string",
	typeNumber:  "number",
	typeInteger: "integer",
	typeBoolean: "boolean",
	typeArray:   "array",
	typeObject:  "object",
}

func (t inputType) String() string { return inputTypeNames[t] }

// parseInput splits an input declaration "name" or "name:type". The name is
// everything before the first colon, so a name cannot contain one.
func parseInput(decl string) (name string, typ inputType, err error) {
	name, typName, typed := strings.Cut(decl, ":")
	if name == "" {
		return "", 0, fmt.Errorf("input %q: empty name", decl)
	}
	if !typed {
		return name, typeAny, nil
	}
	for t, n := range inputTypeNames {
		if n == typName {
			return name, inputType(t), nil
		}
	}
	return "", 0, fmt.Errorf("input %q: unknown type %q (want string, number, integer, boolean, array, object or any)", decl, typName)
}

// parseInputs checks a list of input declarations and returns the typed ones
// by name (nil when there are none), so that Validate looks each parameter up
// once instead of re-parsing declarations per message.
func parseInputs(decls []string) (map[string]inputType, error) {
	var typed map[string]inputType
	seen := make(map[string]bool, len(decls))
	for _, d := range decls {
		name, t, err := parseInput(d)
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("input %q: duplicate name %q", d, name)
		}
		seen[name] = true
		if t != typeAny {
			if typed == nil {
				typed = make(map[string]inputType)
			}
			typed[name] = t
		}
	}
	return typed, nil
}

// Library is an immutable set of verbs and tools. The zero value and a nil
// *Library are empty libraries.
type Library struct {
	verbs map[string]*verbEntry
	// aliases maps each alias to the name of its verb.
	aliases map[string]string
	tools   map[string]*toolEntry
	// joinTools reports that some tool lists "join": from then on a join
	// step's tool must be a known tool that supports it.
	joinTools bool
}

type verbEntry struct {
	def   Verb
	typed map[string]inputType
}

type toolEntry struct {
	def   Tool
	verbs map[string]bool
}

func (t *toolEntry) supports(verb string) bool { return t.verbs[verb] }

// NewLibrary checks and copies the definitions. It reports every problem
// (empty or duplicate verb name or tool id, a reserved verb name, a bad input
// declaration, an alias that is empty, reserved, a verb's name or another
// verb's alias, a tool naming an unknown verb or an alias), joined into one
// error.
func NewLibrary(verbs []Verb, tools []Tool) (*Library, error) {
	return build(nil, verbs, tools)
}

// Extend returns a copy of l with more definitions, typically those of an
// approved SPAWN_AGENT request. The same checks apply, including duplicates
// of definitions already in l. l is unchanged.
func (l *Library) Extend(verbs []Verb, tools []Tool) (*Library, error) {
	return build(l, verbs, tools)
}

// build is base (nil: none) with verbs and tools added, each checked
// against what is there and what comes before it; every mistake is found,
// then all are joined into one error.
func build(base *Library, verbs []Verb, tools []Tool) (*Library, error) {
	lib := &Library{}
	if base != nil {
		// Entries are never modified after construction, so sharing them
		// between libraries is safe.
		lib.verbs = maps.Clone(base.verbs)
		lib.aliases = maps.Clone(base.aliases)
		lib.tools = maps.Clone(base.tools)
		lib.joinTools = base.joinTools
	}
	if lib.verbs == nil {
		lib.verbs = make(map[string]*verbEntry, len(verbs))
	}
	if lib.tools == nil {
		lib.tools = make(map[string]*toolEntry, len(tools))
	}
	if lib.aliases == nil {
		lib.aliases = make(map[string]string)
	}
	added, errs := lib.addVerbs(verbs)
	// Aliases are checked once every name is known, so that an alias equal
	// to the name of a verb defined after it is found as well.
	errs = append(errs, lib.addAliases(added)...)
	errs = append(errs, lib.addTools(tools)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return lib, nil
}

// addVerbs adds the verbs that are right and returns them, with the
// mistakes of the others.
func (l *Library) addVerbs(verbs []Verb) (added []*verbEntry, errs []error) {
	for i, v := range verbs {
		switch {
		case v.Name == "":
			errs = append(errs, fmt.Errorf("verbs[%d]: empty name", i))
			continue
		case v.Name == verbDefine || v.Name == verbInstantiate:
			errs = append(errs, fmt.Errorf("verb %q: name reserved for SPAWN_AGENT messages", v.Name))
			continue
		case l.verbs[v.Name] != nil:
			errs = append(errs, fmt.Errorf("verb %q: duplicate name", v.Name))
			continue
		case l.aliases[v.Name] != "":
			errs = append(errs, fmt.Errorf("verb %q: name is already an alias of verb %q", v.Name, l.aliases[v.Name]))
			continue
		}
		typed, err := parseInputs(v.Inputs)
		if err != nil {
			errs = append(errs, fmt.Errorf("verb %q: %w", v.Name, err))
			continue
		}
		v.Inputs = slices.Clone(v.Inputs)
		v.Aliases = slices.Clone(v.Aliases)
		e := &verbEntry{def: v, typed: typed}
		l.verbs[v.Name] = e
		added = append(added, e)
	}
	return added, errs
}

// addAliases adds the aliases of the verbs added.
func (l *Library) addAliases(added []*verbEntry) (errs []error) {
	for _, e := range added {
		for _, a := range e.def.Aliases {
			switch {
			case a == "":
				errs = append(errs, fmt.Errorf("verb %q: empty alias", e.def.Name))
			case a == verbJoin || a == verbDefine || a == verbInstantiate:
				// A structural or meta step must mean the same in
				// every library.
				errs = append(errs, fmt.Errorf("verb %q: alias %q is a reserved verb name", e.def.Name, a))
			case l.verbs[a] != nil:
				errs = append(errs, fmt.Errorf("verb %q: alias %q is the name of a verb", e.def.Name, a))
			case l.aliases[a] != "":
				errs = append(errs, fmt.Errorf("verb %q: alias %q is already an alias of verb %q", e.def.Name, a, l.aliases[a]))
			default:
				l.aliases[a] = e.def.Name
			}
		}
	}
	return errs
}

// addTools adds the tools whose supported verbs are right.
func (l *Library) addTools(tools []Tool) (errs []error) {
	for i, t := range tools {
		switch {
		case t.ID == "":
			errs = append(errs, fmt.Errorf("tools[%d]: empty id", i))
			continue
		case l.tools[t.ID] != nil:
			errs = append(errs, fmt.Errorf("tool %q: duplicate id", t.ID))
			continue
		}
		set := make(map[string]bool, len(t.SupportedVerbs))
		ok := true
		for _, v := range t.SupportedVerbs {
			switch {
			case set[v]:
				errs = append(errs, fmt.Errorf("tool %q: verb %q listed twice in supported_verbs", t.ID, v))
				ok = false
			case l.aliases[v] != "":
				// Checks compare the verb's name: an alias here would
				// never match.
				errs = append(errs, fmt.Errorf("tool %q: %q in supported_verbs is an alias of verb %q: list the verb's name", t.ID, v, l.aliases[v]))
				ok = false
			case v != verbJoin && l.verbs[v] == nil:
				errs = append(errs, fmt.Errorf("tool %q: unknown verb %q in supported_verbs", t.ID, v))
				ok = false
			}
			set[v] = true
		}
		if !ok {
			continue
		}
		t.SupportedVerbs = slices.Clone(t.SupportedVerbs)
		l.tools[t.ID] = &toolEntry{def: t, verbs: set}
		if set[verbJoin] {
			l.joinTools = true
		}
	}
	return errs
}

func (l *Library) verb(name string) *verbEntry {
	if l == nil {
		return nil
	}
	return l.verbs[name]
}

// canonical returns the name of the verb that name stands for: the verb
// whose alias it is, or name itself.
func (l *Library) canonical(name string) string {
	if l != nil {
		if v, ok := l.aliases[name]; ok {
			return v
		}
	}
	return name
}

func (l *Library) tool(id string) *toolEntry {
	if l == nil {
		return nil
	}
	return l.tools[id]
}

func (l *Library) hasJoinTools() bool { return l != nil && l.joinTools }

// Resolve returns the name of the verb that name denotes in a plan: name
// itself when it is a verb's name, the verb's name when it is an alias. It
// reports false for anything else, including the undefined structural and
// meta verbs (join, define, instantiate). Compare this, not what a plan
// says, with supported_verbs lists.
func (l *Library) Resolve(name string) (string, bool) {
	canon := l.canonical(name)
	if l.verb(canon) == nil {
		return "", false
	}
	return canon, true
}

// Verb returns the definition of a verb, by its name (not an alias: see
// Resolve). The result is a copy.
func (l *Library) Verb(name string) (Verb, bool) {
	e := l.verb(name)
	if e == nil {
		return Verb{}, false
	}
	return copyVerb(e.def), true
}

// Tool returns the definition of a tool. The result is a copy.
func (l *Library) Tool(id string) (Tool, bool) {
	e := l.tool(id)
	if e == nil {
		return Tool{}, false
	}
	return copyTool(e.def), true
}

// Verbs returns copies of all verb definitions sorted by name.
func (l *Library) Verbs() []Verb {
	if l == nil {
		return nil
	}
	return sortedCopies(l.verbs, func(e *verbEntry) Verb { return copyVerb(e.def) })
}

// Tools returns copies of all tool definitions sorted by id.
func (l *Library) Tools() []Tool {
	if l == nil {
		return nil
	}
	return sortedCopies(l.tools, func(e *toolEntry) Tool { return copyTool(e.def) })
}

// sortedCopies returns a copy of each entry of m, in the order of its keys.
func sortedCopies[E, D any](m map[string]*E, copyOf func(*E) D) []D {
	out := make([]D, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, copyOf(m[k]))
	}
	return out
}

// copyVerb and copyTool keep callers from reaching the library's slices,
// which must not change once other goroutines validate against them.
func copyVerb(v Verb) Verb {
	v.Inputs = slices.Clone(v.Inputs)
	v.Aliases = slices.Clone(v.Aliases)
	return v
}

func copyTool(t Tool) Tool {
	t.SupportedVerbs = slices.Clone(t.SupportedVerbs)
	return t
}
