package definition

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Load reads path; a missing file is an empty Set and no error, because
// workflows are optional. Problems in the file are returned wrapped with the
// path; errors.As still finds the Problems.
func Load(path string, agents AgentInfo) (*Set, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Set{Workflows: map[string]*Workflow{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workflows: %w", err)
	}
	set, err := Parse(data, agents)
	if err != nil {
		return nil, fmt.Errorf("workflows: %s:\n%w", path, err)
	}
	return set, nil
}

// Parse reads a workflows.yaml. Every problem is reported (as Problems), not
// only the first; on any problem the Set is nil, so a half-valid file never
// runs. A nil agents knows no agent, so every agent reference is a problem:
// failing closed is safer than skipping the checks.
func Parse(data []byte, agents AgentInfo) (*Set, error) {
	if agents == nil {
		agents = func(string) (bool, bool) { return false, false }
	}
	p := &parser{agents: agents}
	set := &Set{Workflows: map[string]*Workflow{}}
	if root := p.document(data); root != nil {
		p.top(root, set)
	}
	if len(p.probs) > 0 {
		sortProblems(p.probs)
		return nil, p.probs
	}
	return set, nil
}

// parser walks the yaml.v3 node tree rather than decoding into structs: only
// the tree keeps every line and every copy of a duplicated key.
type parser struct {
	agents AgentInfo
	probs  Problems
}

func (p *parser) addf(line int, format string, args ...any) {
	p.probs = append(p.probs, Problem{Line: line, Msg: fmt.Sprintf(format, args...)})
}

// document decodes data and returns the root node of its single document, or
// nil when the file is empty or broken (the problem is recorded).
func (p *parser) document(data []byte) (root *yaml.Node) {
	defer func() {
		// yaml.v3 has panicked on malformed input in past releases; a bad
		// config file must become a Problem, never a crashed gateway.
		if r := recover(); r != nil {
			p.addf(0, "invalid YAML: %v", r)
			root = nil
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if !errors.Is(err, io.EOF) {
			p.syntax(err, data)
		}
		return nil
	}
	// A second document would be ignored by a plain Unmarshal; an operator
	// who appended one expects it to count, so it is an error. An empty
	// trailing document (a final "---") is harmless.
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			p.syntax(err, data)
			return nil
		}
		if len(extra.Content) > 0 && !isNull(extra.Content[0]) {
			p.addf(extra.Content[0].Line, "only one YAML document is allowed")
			return nil
		}
	}
	if len(doc.Content) == 0 {
		return nil
	}
	return doc.Content[0]
}

// syntax records a yaml.v3 error with the line it is about. yaml.v3 puts
// "line N: " in the message, but N is not always the 1-based line:
//   - for parser errors (the fixed list below) it is the 0-based line of the
//     construct that failed, so one is added;
//   - an error on the first line has no "line N" at all, because yaml.v3
//     takes line 0 for "unknown";
//   - an unknown anchor has no line; the first use of the alias is found in
//     the text;
//   - an error at the end of the input points past the last line.
func (p *parser) syntax(err error, data []byte) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, text, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				line, msg = n, text
			}
		}
	}
	switch {
	case isParserProblem(msg):
		line++
	case line == 0 && strings.Contains(msg, "anchor '"):
		if _, name, ok := strings.Cut(msg, "'"); ok {
			name, _, _ = strings.Cut(name, "'")
			line = lineOf(data, "*"+name)
		}
	case line == 0:
		line = 1
	}
	// Errors found at the end of the input (an unclosed "[") point past
	// the last line; the last line with text is where the fix goes.
	if last := bytes.Count(bytes.TrimRight(data, " \t\r\n"), []byte("\n")) + 1; line > last {
		line = last
	}
	p.addf(line, "YAML syntax error: %s", msg)
}

// isParserProblem reports the messages of yaml.v3's parser (parserc.go), as
// opposed to its scanner, whose lines are already 1-based.
func isParserProblem(msg string) bool {
	switch msg {
	case "did not find expected ',' or ']'",
		"did not find expected ',' or '}'",
		"did not find expected '-' indicator",
		"did not find expected <document start>",
		"did not find expected <stream-start>",
		"did not find expected key",
		"did not find expected node content",
		"found duplicate %TAG directive",
		"found duplicate %YAML directive",
		"found incompatible YAML document",
		"found undefined tag handle":
		return true
	}
	return false
}

// lineOf returns the 1-based line of the first occurrence of s in data, or 0.
func lineOf(data []byte, s string) int {
	i := bytes.Index(data, []byte(s))
	if i < 0 {
		return 0
	}
	return bytes.Count(data[:i], []byte("\n")) + 1
}

func (p *parser) top(root *yaml.Node, set *Set) {
	if isNull(root) {
		return
	}
	f, ok := p.fields(root, "top level", "workflows", "step_limit")
	if !ok {
		return
	}
	if e, ok := f["step_limit"]; ok {
		if v, ok := p.nonEmpty(e.val, "step_limit"); ok {
			set.StepLimit.Text, set.StepLimit.Line = v, e.val.Line
		}
	}
	wfs, ok := f["workflows"]
	if !ok || !p.kind(wfs.val, yaml.MappingNode, "workflows") {
		return
	}
	for _, e := range p.entries(wfs.val, "workflows") {
		name := e.key.Value
		if !validName(name) {
			p.addf(e.key.Line, "workflow name %q must match %s", name, namePattern)
		}
		if w := p.workflow(name, e.key, e.val); w != nil {
			set.Workflows[name] = w
		}
	}
}

// lined is a string value with the line it came from, kept until the
// cross-references of a workflow are checked.
type lined struct {
	val  string
	line int
}

// nodeSrc is what the checks after parsing a node need to know about where
// its parts were written.
type nodeSrc struct {
	inputLine int
	owns      []lined
}

// edgeSrc records the lines of an edge's ends.
type edgeSrc struct {
	fromLine, toLine int
}

func (p *parser) workflow(name string, key, val *yaml.Node) *Workflow {
	what := fmt.Sprintf("workflow %q", name)
	f, ok := p.fields(val, what,
		"description", "callers", "start", "max_steps", "max_negotiation_rounds", "max_spawns", "nodes", "edges")
	if !ok {
		return nil
	}
	w := &Workflow{
		Name:                 name,
		Line:                 key.Line,
		MaxSteps:             defaultMaxSteps,
		MaxNegotiationRounds: defaultNegotiation,
		MaxSpawns:            defaultSpawns,
		Nodes:                map[string]*Node{},
	}
	if e, ok := f["description"]; ok {
		w.Description, _ = p.str(e.val, what+": description")
	}
	if e, ok := f["callers"]; ok {
		for _, c := range p.strList(e.val, what+": callers", true) {
			if exists, _ := p.agents(c.val); !exists {
				p.addf(c.line, "%s: caller %q is not a known agent", what, c.val)
			}
			w.Callers = append(w.Callers, c.val)
		}
	}
	p.bounded(f, what, "max_steps", minMaxSteps, maxMaxSteps, &w.MaxSteps)
	p.bounded(f, what, "max_negotiation_rounds", minNegotiation, maxNegotiation, &w.MaxNegotiationRounds)
	p.bounded(f, what, "max_spawns", minSpawns, maxSpawns, &w.MaxSpawns)

	srcs := map[string]nodeSrc{}
	nodesOK := false
	if e, ok := f["nodes"]; !ok {
		p.addf(key.Line, "%s: nodes is required (at least one node)", what)
	} else if p.kind(e.val, yaml.MappingNode, what+": nodes") {
		entries := p.entries(e.val, what+": nodes")
		if len(entries) == 0 {
			p.addf(e.key.Line, "%s: at least one node is required", what)
		}
		nodesOK = len(entries) > 0
		for _, ne := range entries {
			n, src := p.node(what, ne.key, ne.val)
			w.Nodes[n.Name] = n
			w.NodeOrder = append(w.NodeOrder, n.Name)
			srcs[n.Name] = src
		}
	}

	startOK := false
	if e, ok := f["start"]; !ok {
		p.addf(key.Line, "%s: start is required", what)
	} else if s, ok := p.str(e.val, what+": start"); ok {
		w.Start = s
		if _, found := w.Nodes[s]; found {
			startOK = true
		} else if nodesOK {
			// Without nodes every start is unknown; that is one mistake,
			// already reported.
			p.addf(e.val.Line, "%s: start %q is not a node of the workflow", what, s)
		}
	}

	// Reachability is only judged on a complete edge list: with an edge
	// missing because it is broken, "not reachable" would be a consequence
	// of a problem already reported, not a second one.
	edgesOK := true
	var edgeSrcs []edgeSrc
	if e, ok := f["edges"]; ok {
		if !p.kind(e.val, yaml.SequenceNode, what+": edges") {
			edgesOK = false
		} else {
			for _, item := range e.val.Content {
				if ed, src := p.edge(what, item); ed != nil {
					w.Edges = append(w.Edges, ed)
					edgeSrcs = append(edgeSrcs, src)
				} else {
					edgesOK = false
				}
			}
		}
	}

	p.crossCheck(what, w, srcs, edgeSrcs, startOK && edgesOK)
	return w
}

// crossCheck runs the checks that need the whole workflow: references
// between nodes, edges and templates, reachability and entity ownership.
func (p *parser) crossCheck(what string, w *Workflow, srcs map[string]nodeSrc, edgeSrcs []edgeSrc, judgeReach bool) {
	for _, name := range w.NodeOrder {
		n := w.Nodes[name]
		if n.Input == nil {
			continue
		}
		for _, ref := range n.Input.Nodes() {
			if _, ok := w.Nodes[ref]; !ok {
				p.addf(srcs[name].inputLine, "%s: node %q: input refers to %q, which is not input, context or a node of the workflow", what, name, ref)
			}
		}
	}

	for i, e := range w.Edges {
		if _, ok := w.Nodes[e.From]; !ok {
			p.addf(edgeSrcs[i].fromLine, "%s: edge from %q: no such node", what, e.From)
		}
		if _, ok := w.Nodes[e.To]; !ok && e.To != End && e.To != Failed {
			p.addf(edgeSrcs[i].toLine, "%s: edge to %q: no such node (nor %q or %q)", what, e.To, End, Failed)
		}
	}

	// An unreachable node is almost always a missing or misspelt edge; it
	// would never run, so the file is rejected rather than half-working.
	if judgeReach {
		reached := reachable(w)
		for _, name := range w.NodeOrder {
			if !reached[name] {
				p.addf(w.Nodes[name].Line, "%s: node %q is not reachable from start %q", what, name, w.Start)
			}
		}
	}

	// One owner per entity keeps writes to the Global Context free of
	// conflicts between nodes of the same run.
	owner := map[string]string{}
	for _, name := range w.NodeOrder {
		for _, ent := range srcs[name].owns {
			if prev, ok := owner[ent.val]; ok && prev != name {
				p.addf(ent.line, "%s: entity %q is owned by node %q and node %q; an entity has at most one owner", what, ent.val, prev, name)
				continue
			}
			owner[ent.val] = name
		}
	}
}

// reachable returns the nodes reachable from w.Start along the edges.
func reachable(w *Workflow) map[string]bool {
	seen := map[string]bool{w.Start: true}
	queue := []string{w.Start}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, e := range w.Edges {
			if e.From != cur || seen[e.To] {
				continue
			}
			if _, ok := w.Nodes[e.To]; ok {
				seen[e.To] = true
				queue = append(queue, e.To)
			}
		}
	}
	return seen
}

func (p *parser) node(wfWhat string, key, val *yaml.Node) (*Node, nodeSrc) {
	name := key.Value
	what := fmt.Sprintf("%s: node %q", wfWhat, name)
	n := &Node{Name: name, Line: key.Line}
	var src nodeSrc
	switch {
	case reservedNodeName(name):
		p.addf(key.Line, "%s: %q is reserved and cannot name a node", what, name)
	case !validName(name):
		p.addf(key.Line, "%s: node name must match %s", what, namePattern)
	}
	f, ok := p.fields(val, what, "agent", "model", "input", "owns", "timeout")
	if !ok {
		return n, src
	}
	if e, ok := f["agent"]; !ok {
		p.addf(key.Line, "%s: agent is required", what)
	} else if e.val.Kind == yaml.MappingNode {
		n.Pick = p.pick(e.val, what+": agent")
	} else if a, ok := p.nonEmpty(e.val, what+": agent"); ok {
		n.Agent = a
		switch exists, protocol := p.agents(a); {
		case !exists:
			p.addf(e.val.Line, "%s: agent %q does not exist", what, a)
		case !protocol:
			p.addf(e.val.Line, "%s: agent %q does not speak the SACP JSON protocol nor A2A", what, a)
		}
	}
	if e, ok := f["model"]; ok {
		n.Model, _ = p.nonEmpty(e.val, what+": model")
	}
	if e, ok := f["input"]; !ok {
		p.addf(key.Line, "%s: input is required", what)
	} else if s, ok := p.nonEmpty(e.val, what+": input"); ok {
		src.inputLine = e.val.Line
		t, err := ParseTemplate(s)
		if err != nil {
			p.addf(e.val.Line, "%s: input: %v", what, err)
		} else {
			n.Input = t
		}
	}
	if e, ok := f["owns"]; ok {
		for _, ent := range p.strList(e.val, what+": owns", true) {
			if !validName(ent.val) {
				p.addf(ent.line, "%s: owns: entity name %q must match %s", what, ent.val, namePattern)
			}
			n.Owns = append(n.Owns, ent.val)
			src.owns = append(src.owns, ent)
		}
	}
	if e, ok := f["timeout"]; ok {
		if s, ok := p.str(e.val, what+": timeout"); ok {
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				p.addf(e.val.Line, "%s: timeout %q is not a duration (e.g. \"60s\")", what, s)
			case d < minTimeout || d > maxTimeout:
				p.addf(e.val.Line, "%s: timeout %s must be between %s and %s", what, s, minTimeout, maxTimeout)
			default:
				n.Timeout = d
			}
		}
	}
	return n, src
}

// bounded reads the optional integer key of f into dst, which keeps its
// default when the key is absent or out of lo..hi (reported).
func (p *parser) bounded(f map[string]entry, what, key string, lo, hi int, dst *int) {
	e, ok := f[key]
	if !ok {
		return
	}
	v, ok := p.integer(e.val, what+": "+key)
	if !ok {
		return
	}
	if v < lo || v > hi {
		p.addf(e.val.Line, "%s: %s must be between %d and %d, not %d", what, key, lo, hi, v)
		return
	}
	*dst = v
}

// pick reads a registry-driven agent: {verb, inputs, output_type, text,
// spawn_endpoint}, with verb, output_type or text at least. The agent is
// chosen at each step, so nothing here names an agent to check.
func (p *parser) pick(val *yaml.Node, what string) *Pick {
	f, ok := p.fields(val, what, "verb", "inputs", "output_type", "text", "spawn_endpoint")
	if !ok {
		return nil
	}
	pk := &Pick{}
	for _, kv := range []struct {
		key string
		dst *string
	}{{"verb", &pk.Verb}, {"output_type", &pk.OutputType}, {"text", &pk.Text}} {
		if e, ok := f[kv.key]; ok {
			*kv.dst, _ = p.nonEmpty(e.val, what+": "+kv.key)
		}
	}
	if e, ok := f["inputs"]; ok {
		for _, in := range p.strList(e.val, what+": inputs", true) {
			pk.Inputs = append(pk.Inputs, in.val)
		}
	}
	if e, ok := f["spawn_endpoint"]; ok {
		if s, ok := p.nonEmpty(e.val, what+": spawn_endpoint"); ok {
			if u, err := url.Parse(s); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
				p.addf(e.val.Line, "%s: spawn_endpoint %q must be an http(s) URL with a host and no user info", what, s)
			} else {
				pk.SpawnEndpoint = s
			}
		}
	}
	_, verb := f["verb"]
	_, output := f["output_type"]
	_, text := f["text"]
	if !verb && !output && !text {
		p.addf(val.Line, "%s: a registry-driven agent needs verb, output_type or text", what)
	}
	return pk
}

func (p *parser) edge(wfWhat string, item *yaml.Node) (*Edge, edgeSrc) {
	what := fmt.Sprintf("%s: edge", wfWhat)
	var src edgeSrc
	f, ok := p.fields(item, what, "from", "to", "when")
	if !ok {
		return nil, src
	}
	e := &Edge{Line: item.Line}
	fromOK := p.edgeEnd(f, item, what, "from", &e.From, &src.fromLine)
	toOK := p.edgeEnd(f, item, what, "to", &e.To, &src.toLine)
	complete := fromOK && toOK
	if v, ok := f["when"]; ok {
		if s, ok := p.str(v.val, what+": when"); ok {
			c, err := CompileCondition(s)
			if err != nil {
				p.addf(v.val.Line, "%s %s -> %s: when: %v", what, e.From, e.To, err)
			} else {
				e.When = c
			}
		}
	}
	// An edge without both ends is already reported; leaving it out keeps
	// the cross-checks from repeating the same mistake as "no such node".
	if !complete {
		return nil, src
	}
	return e, src
}

// edgeEnd reads the required end key (from or to) of an edge into name
// and line; false when it is missing (reported against the edge) or not a
// string (reported by str).
func (p *parser) edgeEnd(f map[string]entry, item *yaml.Node, what, key string, name *string, line *int) bool {
	v, ok := f[key]
	if !ok {
		p.addf(item.Line, "%s: %s is required", what, key)
		return false
	}
	s, ok := p.str(v.val, what+": "+key)
	if ok {
		*name, *line = s, v.val.Line
	}
	return ok
}

// entry is one key/value pair of a mapping.
type entry struct{ key, val *yaml.Node }

// entries returns the pairs of a mapping in file order, reporting duplicate
// and non-string keys. yaml.v3 keeps both copies of a duplicated key in the
// node tree; taking the last one would hide an editing mistake.
func (p *parser) entries(n *yaml.Node, what string) []entry {
	seen := map[string]int{}
	var out []entry
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind == yaml.ScalarNode && k.Tag == "!!merge":
			p.addf(k.Line, "%s: merge keys (<<) are not supported", what)
			continue
		case k.Kind != yaml.ScalarNode:
			p.addf(k.Line, "%s: keys must be plain strings, not %s", what, describe(k))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			p.addf(k.Line, "%s: duplicate key %q (first at line %d)", what, k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, entry{key: k, val: v})
	}
	return out
}

// fields reads a mapping with a fixed set of keys. Any other key is a
// problem: a misspelt optional key (max_step) would otherwise be ignored
// silently. A key with a null value counts as absent, so an empty "model:"
// line behaves like no model line.
func (p *parser) fields(n *yaml.Node, what string, known ...string) (map[string]entry, bool) {
	if !p.kind(n, yaml.MappingNode, what) {
		return nil, false
	}
	out := map[string]entry{}
	for _, e := range p.entries(n, what) {
		if !slices.Contains(known, e.key.Value) {
			p.addf(e.key.Line, "%s: unknown key %q (expected one of: %s)", what, e.key.Value, strings.Join(known, ", "))
			continue
		}
		if isNull(e.val) {
			continue
		}
		out[e.key.Value] = e
	}
	return out, true
}

// kind checks a node's kind. Aliases are refused rather than followed: they
// would make one line's mistake appear under many names, and the file is
// small enough not to need them.
func (p *parser) kind(n *yaml.Node, want yaml.Kind, what string) bool {
	if n.Kind == want {
		return true
	}
	if n.Kind == yaml.AliasNode {
		p.addf(n.Line, "%s: YAML aliases (*%s) are not supported", what, n.Value)
		return false
	}
	p.addf(n.Line, "%s must be %s, not %s", what, kindName(want), describe(n))
	return false
}

func (p *parser) str(n *yaml.Node, what string) (string, bool) {
	if !p.kind(n, yaml.ScalarNode, what) {
		return "", false
	}
	if n.Tag != "!!str" {
		p.addf(n.Line, "%s must be a string, not %s", what, describe(n))
		return "", false
	}
	return n.Value, true
}

func (p *parser) nonEmpty(n *yaml.Node, what string) (string, bool) {
	s, ok := p.str(n, what)
	if ok && strings.TrimSpace(s) == "" {
		p.addf(n.Line, "%s must not be empty", what)
		return "", false
	}
	return s, ok
}

func (p *parser) integer(n *yaml.Node, what string) (int, bool) {
	if !p.kind(n, yaml.ScalarNode, what) {
		return 0, false
	}
	if n.Tag != "!!int" {
		p.addf(n.Line, "%s must be an integer, not %s", what, describe(n))
		return 0, false
	}
	var v int
	if err := n.Decode(&v); err != nil {
		p.addf(n.Line, "%s: %q is not a valid integer", what, n.Value)
		return 0, false
	}
	return v, true
}

// strList reads a list of non-empty strings; with unique, a repeated entry
// is a problem (and left out).
func (p *parser) strList(n *yaml.Node, what string, unique bool) []lined {
	if !p.kind(n, yaml.SequenceNode, what) {
		return nil
	}
	var out []lined
	seen := map[string]int{}
	for _, item := range n.Content {
		s, ok := p.nonEmpty(item, what+" entry")
		if !ok {
			continue
		}
		if first, dup := seen[s]; dup && unique {
			p.addf(item.Line, "%s: %q is listed twice (first at line %d)", what, s, first)
			continue
		}
		seen[s] = item.Line
		out = append(out, lined{val: s, line: item.Line})
	}
	return out
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	}
	return "a YAML node"
}

// describe names what a node is, for "must be X, not Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return "a string"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "null"
		}
		return "a value tagged " + n.Tag
	}
	return "an empty document"
}
