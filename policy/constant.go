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
		if readsInputOrClock(r) {
			return false
		}
		for dep := range c.Graph.Dependencies(r) {
			d, ok := dep.(*ast.Rule)
			if !ok {
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
		if found {
			return true
		}
		switch v := t.Value.(type) {
		case ast.Ref:
			if v.HasPrefix(ast.InputRootRef) {
				found = true
			}
		case ast.Var:
			if v.Equal(ast.InputRootDocument.Value) {
				found = true
			}
		case ast.Call:
			found = nondeterministic(v[0])
		}
		return found
	})
	if found {
		return true
	}
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
