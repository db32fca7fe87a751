package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"
)

// inputFree reports whether the decision rule at query can be computed
// without the input: neither its rules nor any rule or function they
// depend on (transitively, through the compiler's dependency graph, which
// counts every rule a dynamic reference such as rules[_].deny could reach)
// reads input or calls a non-deterministic built-in (time, random, HTTP).
// The store holds no data the gateway changes between decisions, so such a
// decision has one value for every input: the smoke test's evaluation of
// it when the policies load is kept, and each request skips the
// evaluation. A decision with no
// rules at all is not input-free: it is undefined, and fails closed on
// every evaluation as before.
func inputFree(c *ast.Compiler, query string) bool {
	return everyRule(c, query, func(r *ast.Rule) bool { return !readsInputOrClock(r) })
}

// partialSafe reports whether partial evaluation may settle part of the
// decision at query ahead of a request: no rule it depends on calls a
// non-deterministic built-in (time, random, HTTP and other I/O), and none
// is of a form whose partial evaluation can differ from evaluating it (the
// differential tests found both): an else chain, or a single-value rule
// that could conflict (defined more than once besides its default, or with
// a variable key). Such decisions are evaluated in full on every request.
func partialSafe(c *ast.Compiler, query string) bool {
	defs := map[string]int{}
	return everyRule(c, query, func(r *ast.Rule) bool {
		if callsNondeterministic(r) || r.Else != nil {
			return false
		}
		if r.Default || r.Head.RuleKind() != ast.SingleValue {
			return true
		}
		if !r.Head.Ref().IsGround() || r.Module == nil {
			return false
		}
		path := r.Ref().String()
		defs[path]++
		return defs[path] == 1
	})
}

// everyRule reports whether ok holds for the decision rules at query and
// every rule or function they depend on (transitively, through the
// compiler's dependency graph, which counts every rule a dynamic reference
// such as rules[_].deny could reach). No rules at all is false.
func everyRule(c *ast.Compiler, query string, ok func(*ast.Rule) bool) bool {
	ref, err := ast.ParseRef(query)
	if err != nil {
		return false
	}
	roots := c.GetRulesDynamicWithOpts(ref, ast.RulesOptions{})
	if len(roots) == 0 {
		return false
	}
	seen := make(map[*ast.Rule]bool, len(roots))
	queue := append([]*ast.Rule(nil), roots...)
	for len(queue) > 0 {
		r := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if seen[r] {
			continue
		}
		seen[r] = true
		if !ok(r) {
			return false
		}
		for dep := range c.Graph.Dependencies(r) {
			d, isRule := dep.(*ast.Rule)
			if !isRule {
				return false // a dependency the analysis does not know: assume the worst
			}
			queue = append(queue, d)
		}
	}
	return true
}

// readsInputOrClock reports whether rule r (with its else branches) refers
// to input or calls a non-deterministic built-in.
func readsInputOrClock(r *ast.Rule) bool {
	found := false
	ast.WalkTerms(r, func(t *ast.Term) bool {
		switch v := t.Value.(type) {
		case ast.Ref:
			found = found || v.HasPrefix(ast.InputRootRef)
		case ast.Var:
			found = found || v.Equal(ast.InputRootDocument.Value)
		}
		return found
	})
	return found || callsNondeterministic(r)
}

// callsNondeterministic reports whether rule r (with its else branches)
// calls a non-deterministic built-in.
func callsNondeterministic(r *ast.Rule) bool {
	found := false
	ast.WalkTerms(r, func(t *ast.Term) bool {
		if v, ok := t.Value.(ast.Call); ok {
			found = found || nondeterministic(v[0])
		}
		return found
	})
	ast.WalkExprs(r, func(e *ast.Expr) bool {
		if !found && e.IsCall() {
			found = nondeterministic(e.OperatorTerm())
		}
		return found
	})
	return found
}

func nondeterministic(op *ast.Term) bool {
	ref, ok := op.Value.(ast.Ref)
	if !ok {
		return true // a call through something other than a name: assume the worst
	}
	b, ok := ast.BuiltinMap[ref.String()]
	return ok && b.Nondeterministic
}
