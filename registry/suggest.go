package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sacpgw/gateway/compact"
)

// Suggestion is what an empty answer offers instead.
type Suggestion struct {
	// Spawn is a SPAWN_AGENT message for an agent that would match the
	// query: POST it to /registry/spawn as is, or adapt it first (the
	// names and the verb are guesses from the query's words).
	Spawn *SpawnMessage `json:"spawn"`
}

// SpawnMessage is a compact SACP SPAWN_AGENT message: one define step (a
// new tool) and one instantiate step (the agent).
type SpawnMessage struct {
	G    string            `json:"g"`
	Ctx  map[string]string `json:"ctx,omitempty"`
	Plan [][]any           `json:"plan"`
}

// Limits of the derived names: "<BASE>[_n]_AGENT" stays well inside an
// agent name's 63 characters.
const (
	maxNameBase   = 40
	maxVerbLen    = 40
	maxSuggestTry = 20
	maxDescBytes  = 256
)

// stopWords are skipped when names and verbs are derived from a query's
// text: "an agent to find hotels in Paris" is FIND_HOTELS_PARIS.
var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "in": true, "on": true, "of": true, "for": true, "to": true, "and": true,
	"or": true, "with": true, "by": true, "at": true, "from": true, "into": true, "that": true, "which": true,
	"who": true, "is": true, "are": true, "be": true, "can": true, "i": true, "me": true, "my": true, "we": true,
	"our": true, "need": true, "want": true, "some": true, "any": true, "agent": true, "agents": true,
	"please": true, "something": true, "someone": true,
}

// inputTypes are the types an input declaration may name (compact.Verb).
var inputTypes = []string{"string", "number", "integer", "boolean", "array", "object", "any"}

// suggest builds the SPAWN_AGENT message of an agent matching q:
//
//   - verb: q.Verb in the library's spelling when the library has it
//     (compared case-insensitively), else q.Verb lowercased with anything
//     but letters, digits and '_' as '_'; without q.Verb, the first word of
//     the text that names a library verb, else the text's first word that
//     is not a stop word, else "handle".
//   - names: BASE_TOOL (the define step) and BASE_AGENT (the instantiate
//     step), BASE being the text's first three words that are not stop
//     words, else the query's verb (or the verb above) and output type, uppercased with anything
//     but A-Z and 0-9 as '_', at most 40 characters ("NEW" when nothing is
//     left); "_2", "_3", ... is added to BASE while a name is taken.
//   - define params: description (the text, or a sentence made of the
//     structural criteria), inputs (the query's, as input declarations;
//     none given: a library verb's), outputs (output_type; none given: a
//     library verb's).
//
// The message is checked as POST /registry/spawn would (ParseSpawn, the
// agent-name rule, the library extension): one that would be refused is
// never suggested (nil then). A spawn cannot set tags: a query's tags are
// not in the message, and the spawned agent will not carry them.
func (r *Registry) suggest(v *view, q Query) *Suggestion {
	lib := v.lib
	verb, known := suggestVerb(lib, q)
	var inputs, outputs []string
	inputs = inputDecls(q.Inputs)
	if q.OutputType != "" {
		outputs = []string{q.OutputType}
	}
	if known {
		def, _ := lib.Verb(verb)
		if len(inputs) == 0 {
			inputs = def.Inputs
		}
		if len(outputs) == 0 && def.Outputs != "" {
			outputs = []string{def.Outputs}
		}
	}
	desc := describe(q, verb)
	base := nameBase(q, verb)
	for n := 1; n <= maxSuggestTry; n++ {
		stem := base
		if n > 1 {
			stem += "_" + strconv.Itoa(n)
		}
		agent, tool := stem+"_AGENT", stem+"_TOOL"
		if _, taken := v.byName[agent]; taken {
			continue
		}
		if _, taken := lib.Tool(tool); taken {
			continue
		}
		params := map[string]any{"description": desc}
		if len(inputs) > 0 {
			params["inputs"] = inputs
		}
		if len(outputs) > 0 {
			params["outputs"] = outputs
		}
		msg := &SpawnMessage{
			G:   compact.GoalSpawnAgent,
			Ctx: map[string]string{"missing_capability": desc},
			Plan: [][]any{
				{"define", tool, params},
				{"instantiate", agent, map[string]any{"tool": tool, "verb": verb}},
			},
		}
		if err := checkSuggestion(v, msg); err != nil {
			r.opts.log.Debug("registry: no spawn suggestion", "agent_name", agent, "error", err.Error())
			return nil
		}
		return &Suggestion{Spawn: msg}
	}
	return nil
}

// checkSuggestion checks msg as POST /registry/spawn and Registry.Spawn
// would.
func checkSuggestion(v *view, msg *SpawnMessage) error {
	raw, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	sp, res := v.lib.ParseSpawn(raw)
	if res.Valid() {
		res = checkName(sp.AgentName)
	}
	if !res.Valid() {
		return fmt.Errorf("%s: %s", res.Code, res.Details)
	}
	if _, err := extend(v.lib, sp.NewVerbs, sp.NewTools); err != nil {
		return err
	}
	return nil
}

// suggestVerb is the suggestion's verb, and whether the library has it.
func suggestVerb(lib *compact.Library, q Query) (string, bool) {
	if q.Verb != "" {
		if _, ok := lib.Verb(q.Verb); ok {
			return q.Verb, true
		}
		for _, d := range lib.Verbs() {
			if strings.EqualFold(d.Name, q.Verb) {
				return d.Name, true
			}
		}
		if v := verbName(q.Verb); v != "" {
			return v, false
		}
	}
	words := tokens(q.Text)
	for _, w := range words {
		if _, ok := lib.Verb(w); ok {
			return w, true
		}
	}
	for _, w := range words {
		if !stopWords[w] {
			if v := verbName(w); v != "" {
				return v, false
			}
		}
	}
	return "handle", false
}

// verbName is s as a new verb's name: lowercase letters, digits and '_',
// at most 40 bytes; "" when nothing is left or the name is reserved.
func verbName(s string) string {
	v := sanitize(strings.ToLower(s), func(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }, maxVerbLen)
	switch v {
	case "join", "define", "instantiate":
		return ""
	}
	return v
}

// nameBase is the uppercase stem of the suggested names.
func nameBase(q Query, verb string) string {
	var words []string
	for _, w := range tokens(q.Text) {
		if !stopWords[w] {
			words = append(words, w)
		}
		if len(words) == 3 {
			break
		}
	}
	if len(words) == 0 {
		if q.Verb != "" {
			verb = q.Verb // what was asked for, even when the verb is not usable
		}
		words = []string{verb, q.OutputType}
	}
	b := sanitize(strings.ToUpper(strings.Join(words, "_")), func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' }, maxNameBase)
	if b == "" {
		return "NEW"
	}
	return b
}

// sanitize keeps the runes ok accepts, turns runs of others into one '_',
// trims '_' at either end and clips to n bytes (a name of plain ASCII).
func sanitize(s string, ok func(rune) bool, n int) string {
	var b strings.Builder
	under := false
	for _, r := range s {
		if ok(r) {
			if under && b.Len() > 0 {
				b.WriteByte('_')
			}
			under = false
			b.WriteRune(r)
			continue
		}
		under = true
	}
	out := b.String()
	if len(out) > n {
		out = strings.TrimRight(out[:n], "_")
	}
	return out
}

// inputDecls turns a query's inputs into define-step input declarations:
// "name" or "name:type" with a known type (another type is dropped),
// each name once.
func inputDecls(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		name, typ, typed := strings.Cut(strings.TrimSpace(s), ":")
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		if typed && slices.Contains(inputTypes, typ) {
			out = append(out, name+":"+typ)
			continue
		}
		out = append(out, name)
	}
	return out
}

// describe is the suggested agent's description: the query's text, or its
// criteria in words.
func describe(q Query, verb string) string {
	if t := strings.Join(strings.Fields(q.Text), " "); t != "" {
		return clipUTF8(t, maxDescBytes)
	}
	d := "Agent for verb " + verb
	if len(q.Inputs) > 0 {
		d += " taking " + strings.Join(q.Inputs, ", ")
	}
	if q.OutputType != "" {
		d += " returning " + q.OutputType
	}
	return clipUTF8(d, maxDescBytes)
}
