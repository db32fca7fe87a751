// Package definition holds the definitions of workflows: named chains of
// agents read from the optional workflows.yaml of the gateway's config
// directory.
//
// Everything that can be checked without running a workflow is checked at
// load: the file's structure (unknown and duplicate keys are errors, so a
// typo never silently disables a setting), the agents, the graph, the edge
// conditions (Rego expressions, compiled and prepared once) and the input
// templates. Parse reports every problem with its line, so an operator
// fixes the file in one pass instead of one error per restart.
//
// The package only describes workflows; the engine that runs them lives
// elsewhere and consumes Workflow, Condition and Template.
package definition

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Reserved edge targets: the run ends there.
const (
	End    = "end"    // the run is COMPLETED
	Failed = "failed" // the run is FAILED
)

// Defaults and bounds of the per-workflow limits. The bounds exist so that a
// typo (max_steps: 20000) cannot turn a workflow into a runaway loop.
const (
	defaultMaxSteps    = 20
	minMaxSteps        = 1
	maxMaxSteps        = 1000
	defaultNegotiation = 2
	minNegotiation     = 0
	maxNegotiation     = 10
	// A registry-driven node asks for at most max_spawns new agents per
	// run (SPAWN_AGENT, each decided by the spawn policy); 0: never.
	defaultSpawns = 1
	minSpawns     = 0
	maxSpawns     = 5
	minTimeout    = time.Second
	maxTimeout    = time.Hour
)

// Names of workflows, nodes and entities are restricted so that they can be
// used unquoted in templates, conditions, URLs and drawings.
const (
	namePattern = `^[a-z][a-z0-9_-]{0,62}$`
	maxNameLen  = 63
)

// The roots of a template path besides node names.
const (
	templateInputRoot   = "input"
	templateContextRoot = "context"
)

// Problem is one thing wrong in the file; Line is 1-based, 0 when no line
// applies.
type Problem struct {
	Line int
	Msg  string
}

// Problems is every problem found in a file. It is an error so that Parse can
// return all of them at once.
type Problems []Problem

// Error joins the problems as "line N: msg" lines, sorted by line (problems
// without a line first), so the report reads top to bottom like the file.
func (p Problems) Error() string {
	sorted := slices.Clone(p)
	sortProblems(sorted)
	var b strings.Builder
	for i, pr := range sorted {
		if i > 0 {
			b.WriteByte('\n')
		}
		if pr.Line > 0 {
			fmt.Fprintf(&b, "line %d: ", pr.Line)
		}
		b.WriteString(pr.Msg)
	}
	return b.String()
}

// sortProblems orders by line and keeps discovery order within a line, which
// follows the structure of the file (key before value, node before edge).
func sortProblems(p Problems) {
	slices.SortStableFunc(p, func(a, b Problem) int { return cmp.Compare(a.Line, b.Line) })
}

// AgentInfo tells Parse whether an agent id exists and whether it can take
// a step: it speaks the SACP JSON protocol, or A2A.
type AgentInfo func(id string) (exists, protocol bool)

// Set is every workflow of a file, by name, and the file's step_limit.
type Set struct {
	Workflows map[string]*Workflow
	// StepLimit caps the steps of all the runs one caller starts, across
	// workflows, per window; zero: the default (CallerSteps).
	StepLimit StepLimit
}

// StepLimit is step_limit: N steps per Period.
type StepLimit struct {
	N      int
	Period time.Duration
	// Text and Line are what the file wrote; the config loader, which owns
	// the N/period syntax of every limit, reads Text into N and Period.
	Text string
	Line int
}

// The step limit of a file that sets none: ten runs of the default
// max_steps an hour for each caller.
const (
	DefaultStepLimitN      = 200
	DefaultStepLimitPeriod = time.Hour
)

// CallerSteps returns the step limit in force: the file's, or the default.
func (s *Set) CallerSteps() (n int, period time.Duration) {
	if s == nil || s.StepLimit.N <= 0 || s.StepLimit.Period <= 0 {
		return DefaultStepLimitN, DefaultStepLimitPeriod
	}
	return s.StepLimit.N, s.StepLimit.Period
}

// Names returns the workflow names sorted.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.Workflows))
}

// Get returns a workflow or nil. It is nil-safe on a nil *Set so that a
// gateway without workflows.yaml needs no special case.
func (s *Set) Get(name string) *Workflow {
	if s == nil {
		return nil
	}
	return s.Workflows[name]
}

// Workflow is one named chain of agents.
type Workflow struct {
	Name, Description    string
	Callers              []string
	Start                string
	MaxSteps             int // default 20; 1..1000
	MaxNegotiationRounds int // default 2; 0..10
	MaxSpawns            int // default 1; 0..5: agents a run may ask to spawn
	Nodes                map[string]*Node
	NodeOrder            []string // declaration order
	Edges                []*Edge  // declaration order
	Line                 int
}

// Node is one step of a workflow: an agent called with a rendered input.
// The agent is fixed (Agent) or chosen by the registry at each step (Pick).
type Node struct {
	Name, Agent, Model string
	Pick               *Pick         // nil: Agent is the node's agent
	Input              *Template     // required
	Owns               []string      // Global Context entity names this node may write
	Timeout            time.Duration // 0 = not set (the engine's default applies); when set 1s..1h
	Line               int
}

// Pick is a registry-driven node's agent: the registry is asked for the
// best agent matching it when the step runs (seed 001 Appendices A, B, D).
type Pick struct {
	Verb, OutputType, Text string
	Inputs                 []string
	// SpawnEndpoint is where an agent spawned for this node receives its
	// messages; empty: a spawned agent gets none, so it cannot be called.
	SpawnEndpoint string
}

// AgentLabel names the node's agent for people: its id, or what the
// registry is asked for ("registry: verb check", "registry: text").
func (n *Node) AgentLabel() string {
	switch {
	case n.Pick == nil:
		return n.Agent
	case n.Pick.Verb != "":
		return "registry: verb " + n.Pick.Verb
	case n.Pick.OutputType != "":
		return "registry: output " + n.Pick.OutputType
	}
	return "registry: text"
}

// Edge leads from one node to another node or to End or Failed.
type Edge struct {
	From, To string
	When     *Condition // nil: always
	Line     int
}

// EdgesFrom returns the edges leaving node, in declaration order: the engine
// takes the first edge whose condition holds, so order is meaningful.
func (w *Workflow) EdgesFrom(node string) []*Edge {
	var out []*Edge
	for _, e := range w.Edges {
		if e.From == node {
			out = append(out, e)
		}
	}
	return out
}

// validName reports whether s matches namePattern. It is hand-written rather
// than a package-level regexp to keep the package free of global state.
func validName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// reservedNodeName reports names a node may not take: End and Failed are
// edge targets, input and context are the other roots of a template.
func reservedNodeName(s string) bool {
	switch s {
	case End, Failed, templateInputRoot, templateContextRoot:
		return true
	}
	return false
}
