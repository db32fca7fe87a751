package policy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// Most of a decision depends on who asks, which does not change between
// requests: the agent's registry entry. Partial evaluation with the agent
// known and everything a request brings unknown tells, once per agent and
// loaded policy set, whether the decision is a constant for that agent (a
// request skips evaluation and conversion) or what is left of it (the
// residual, evaluated per request in place of the whole policy). Decisions
// keep their own id and the revision of the policies that decided.

// requestInputs are, per decision point, the top-level input members a
// request brings (docs/policy-authoring.md): the unknowns of the partial
// evaluation. A decision whose input has any other member besides agent is
// evaluated in full, since the partial evaluation took that member as
// absent.
var requestInputs = [numPoints][]string{
	ptApproval:   {"request", "protocol", "authz", "known_references"},
	ptChat:       {"request", "model", "dialect"},
	ptGuardrails: {"response"},
	ptSpawn:      {"message", "spawn"},
	ptMessages:   {"message", "recipient", "authz"},
	ptWorkflow:   {"workflow", "input"},
	ptSignedURL:  {"workflow", "node", "url"},
	ptMCP:        {"server", "method", "tool", "resource", "prompt", "arguments", "authz"},
	ptMCPClients: {"person", "server", "client"},
}

// maxFastPaths bounds the agents remembered per policy set (an agents file
// reloaded many times leaves old entries behind); past it, decisions of new
// agents are evaluated in full.
const maxFastPaths = 4096

// How a decision point is decided for one agent.
const (
	pathFull     = iota // the whole policy, per request
	pathConstant        // decided when the agent was first seen
	pathResidual        // what partial evaluation left, per request
)

// fastPath is the outcome of partially evaluating one decision point for
// one agent.
type fastPath struct {
	kind     int
	value    any       // pathConstant: the decision's value
	residual *residual // pathResidual
	// reader, for a residual, is the decision with the strict reader's
	// guarantees applied (input.request a ChatRequest); nil when they do
	// not settle what the residual reads.
	reader *readerPath
	// memo, for a residual, remembers its values by what it reads of the
	// input; nil when it reads more than a few scalars (memoPathFor).
	memo *memoPath
}

var fullPath = &fastPath{kind: pathFull}

// residual is a compiled residual query: the partial evaluation's query
// and its support rules, compiled on their own (or with the policies when
// they still refer to them).
type residual struct {
	compiler *ast.Compiler
	q        query
}

// fastPaths caches, per decision point and agent document, how that agent's
// decisions are made, and shares compiled residuals between agents whose
// residual is the same text.
type fastPaths struct {
	byAgent [numPoints]sync.Map // ast.Object (the agent, by identity) → *fastPath
	n       atomic.Int64
	pending sync.WaitGroup // partial evaluations running (tests wait for them)
	// mu serializes partial evaluations and guards what they share: the
	// private compiler and the compiled residuals.
	mu         sync.Mutex
	compiler   *ast.Compiler
	queries    [numPoints]query
	compileErr error
	residuals  map[string]*residual
}

// fastPathFor returns how pt is decided for input's agent. pathFull when
// the input does not allow a fast path (no preconverted agent, a member
// partial evaluation did not consider, a point partialSafe refuses), and
// while the agent's first partial evaluation runs: it is started in the
// background on the agent's first decision (compiling a residual takes
// tens of milliseconds, which no request should wait for), and that
// decision and those meanwhile are evaluated in full.
func (p *prepared) fastPathFor(pt point, input map[string]any) *fastPath {
	if !p.partialOK[pt] {
		return fullPath
	}
	agent, ok := input["agent"].(ast.Object)
	if !ok {
		return fullPath
	}
	for k := range input {
		if k != "agent" && !isRequestInput(pt, k) {
			return fullPath
		}
	}
	if fp, ok := p.fast.byAgent[pt].Load(agent); ok {
		return fp.(*fastPath)
	}
	if p.fast.n.Add(1) > maxFastPaths {
		p.fast.n.Add(-1)
		return fullPath
	}
	if _, loaded := p.fast.byAgent[pt].LoadOrStore(agent, fullPath); loaded {
		p.fast.n.Add(-1)
		return fullPath
	}
	p.fast.pending.Add(1)
	go func() {
		defer p.fast.pending.Done()
		p.fast.byAgent[pt].Store(agent, p.partial(pt, agent))
	}()
	return fullPath
}

// warmFrom settles, before p serves, every decision point for the agents
// prev had seen: after a reload the agents keep their fast paths.
func (p *prepared) warmFrom(prev *prepared) {
	if prev == nil {
		return
	}
	for pt := range numPoints {
		if !p.partialOK[pt] {
			continue
		}
		prev.fast.byAgent[pt].Range(func(k, _ any) bool {
			if p.fast.n.Add(1) > maxFastPaths {
				return false
			}
			agent := k.(ast.Object)
			p.fast.byAgent[pt].Store(agent, p.partial(pt, agent))
			return true
		})
	}
}

func isRequestInput(pt point, k string) bool {
	for _, name := range requestInputs[pt] {
		if name == k {
			return true
		}
	}
	return false
}

// partialTimeout bounds one partial evaluation; one that takes longer is
// given up for full evaluation.
const partialTimeout = 2 * time.Second

// partial evaluates pt with the agent known and the request's members
// unknown. Anything it cannot settle (an error, an undefined decision) leaves
// the decision to full evaluation, which fails closed as before.
func (p *prepared) partial(pt point, agent ast.Object) *fastPath {
	ctx, cancel := context.WithTimeout(context.Background(), partialTimeout)
	defer cancel()
	// OPA's partial evaluation rewrites terms of the rules it walks in
	// place (copy propagation), so it runs on a private copy of the
	// policies, one at a time, never on the compiler requests evaluate with.
	p.fast.mu.Lock()
	defer p.fast.mu.Unlock()
	c, qs, err := p.partialCompiler()
	if err != nil {
		return fullPath
	}
	unknowns := make([]*ast.Term, len(requestInputs[pt]))
	for i, name := range requestInputs[pt] {
		unknowns[i] = ast.NewTerm(ast.InputRootRef.Append(ast.StringTerm(name)))
	}
	cancelQuery := topdown.NewCancel()
	stop := context.AfterFunc(ctx, cancelQuery.Cancel)
	defer stop()
	q := &qs[pt]
	in := ast.NewObject([2]*ast.Term{ast.StringTerm("agent"), ast.NewTerm(agent.Copy())})
	bodies, support, err := topdown.NewQuery(q.body).
		WithQueryCompiler(q.qc).
		WithCompiler(c).
		WithStore(p.store).
		WithTransaction(p.txn).
		WithMetrics(noMetrics).
		WithCancel(cancelQuery).
		WithUnknowns(unknowns).
		WithInput(ast.NewTerm(in)).
		PartialRun(ctx)
	if err != nil || len(bodies) == 0 {
		return fullPath
	}
	body := bodies[0]
	if len(bodies) > 1 {
		body, support = foldAlternatives(bodies, support, q.result)
	}
	reads, policies := residualRefs(body, support)
	r, err := p.compileResidual(body, support, policies, q.result)
	if err != nil {
		return fullPath
	}
	if reads {
		fp := &fastPath{kind: pathResidual, residual: r}
		if !policies {
			fp.reader = p.readerPathFor(ctx, pt, body, support, q.result)
			fp.memo = memoPathFor(pt, body, support)
		}
		return fp
	}
	// Nothing of the request is read: the decision's value for this agent.
	out := evalQuery(ctx, r.compiler, p, &r.q, pt, nil)
	if out.err != nil {
		return fullPath
	}
	return &fastPath{kind: pathConstant, value: out.value}
}

// alternativesRef is the complete rule several alternative residual
// queries are folded into (named so as not to be any variable of theirs).
var alternativesRef = ast.MustParseRef("data.partial.__alternatives__.__result__")

// foldAlternatives folds the alternative queries partial evaluation left
// for a decision with several ways to be defined (one per definition of a
// rule it depends on, such as each rule of a set it picks its value from)
// into one query: the decision is a complete rule with one definition per
// alternative. It keeps full evaluation's meaning: alternatives that agree
// give one value, alternatives that do not are a conflict (an error, and a
// residual that fails is evaluated again in full), none is undefined.
func foldAlternatives(bodies []ast.Body, support []*ast.Module, result ast.Var) (ast.Body, []*ast.Module) {
	n := len(alternativesRef)
	m := &ast.Module{Package: &ast.Package{Path: alternativesRef[:n-1].Copy()}}
	name := alternativesRef[n-1].Value.(ast.String)
	for _, b := range bodies {
		head := &ast.Head{Name: ast.Var(name), Reference: ast.Ref{ast.VarTerm(string(name))}, Value: ast.VarTerm(string(result))}
		m.Rules = append(m.Rules, &ast.Rule{Head: head, Body: b, Module: m})
	}
	body := ast.NewBody(ast.Equality.Expr(ast.VarTerm(string(result)), ast.NewTerm(alternativesRef.Copy())))
	return body, append(support, m)
}

// partialCompiler is the private copy of the policies partial evaluation
// runs on, compiled on first use. Called with fast.mu held.
func (p *prepared) partialCompiler() (*ast.Compiler, *[numPoints]query, error) {
	f := &p.fast
	if f.compiler == nil && f.compileErr == nil {
		c, err := compileCopy(p.compiler, nil)
		if err == nil {
			for pt := range numPoints {
				if f.queries[pt], err = compileQuery(c, queries[pt]); err != nil {
					break
				}
			}
		}
		f.compiler, f.compileErr = c, err
	}
	return f.compiler, &f.queries, f.compileErr
}

// compileCopy compiles copies of extra and, when from is set, of from's
// modules: compiling rewrites modules in place, and from's serve requests.
func compileCopy(from *ast.Compiler, extra map[string]*ast.Module) (*ast.Compiler, error) {
	modules := make(map[string]*ast.Module, len(extra))
	for name, m := range extra {
		modules[name] = m.Copy()
	}
	caps := ast.CapabilitiesForThisVersion()
	if from != nil {
		caps = from.Capabilities()
		for name, m := range from.Modules {
			modules[name] = m.Copy()
		}
	}
	c := ast.NewCompiler().WithEnablePrintStatements(false).WithCapabilities(caps)
	if c.Compile(modules); c.Failed() {
		return nil, c.Errors
	}
	return c, nil
}

// compileResidual compiles a residual query binding result, sharing the
// compiled form between agents with the same residual. Called with fast.mu
// held.
func (p *prepared) compileResidual(body ast.Body, support []*ast.Module, withPolicies bool, result ast.Var) (*residual, error) {
	var key strings.Builder
	key.WriteString(body.String())
	for _, m := range support {
		key.WriteString("\n")
		key.WriteString(m.String())
	}
	if r, ok := p.fast.residuals[key.String()]; ok {
		return r, nil
	}
	modules := make(map[string]*ast.Module, len(support))
	for i, m := range support {
		modules[fmt.Sprintf("partial/%d.rego", i)] = m
	}
	from := p.compiler
	if !withPolicies {
		from = nil
	}
	// Copies throughout: the residual shares no term with the policies or
	// with the partial evaluation's copy of them.
	c, err := compileCopy(from, modules)
	if err != nil {
		return nil, err
	}
	qc := c.QueryCompiler().WithEnablePrintStatements(false).WithStrict(false)
	compiled, err := qc.Compile(body.Copy())
	if err != nil {
		return nil, err
	}
	for rewritten, original := range qc.RewrittenVars() {
		if original == result {
			result = rewritten
		}
	}
	r := &residual{compiler: c, q: query{qc: qc, body: compiled, result: result}}
	if p.fast.residuals == nil {
		p.fast.residuals = map[string]*residual{}
	}
	p.fast.residuals[key.String()] = r
	return r, nil
}

// partialRoot is where the partial evaluation puts the support rules.
var partialRoot = ast.MustParseRef("data.partial")

// residualRefs reports whether the residual reads the input at all, and
// whether it refers to a data document outside its own support rules (a
// rule the partial evaluation kept by reference, such as a function it did
// not inline).
func residualRefs(body ast.Body, support []*ast.Module) (input, policies bool) {
	var visit func(x any)
	visit = func(x any) {
		ast.WalkTerms(x, func(t *ast.Term) bool {
			switch v := t.Value.(type) {
			case ast.Ref:
				input = input || v.HasPrefix(ast.InputRootRef)
				policies = policies || v.HasPrefix(ast.DefaultRootRef) && !v.HasPrefix(partialRoot)
				// The head of a reference is settled above: only what
				// it is indexed with (and a call it starts from) can
				// read more. A bare data below would count every
				// residual as reading the policies.
				if _, isVar := v[0].Value.(ast.Var); !isVar {
					visit(v[0])
				}
				for _, op := range v[1:] {
					visit(op)
				}
				return true
			case ast.Var:
				input = input || v.Equal(ast.InputRootDocument.Value)
				policies = policies || v.Equal(ast.DefaultRootDocument.Value)
			}
			return false
		})
	}
	visit(body)
	for _, m := range support {
		// Not the package clause: its path is walked as a bare data.
		for _, imp := range m.Imports {
			visit(imp)
		}
		for _, r := range m.Rules {
			visit(r)
		}
	}
	return input, policies
}
