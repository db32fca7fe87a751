package definition

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// The names a condition reads. They are rewritten to input.response,
// input.input and input.context so that the whole evaluation input is one
// document and nothing else (data, the environment) is reachable.
const (
	condResponse = "response"
	condInput    = "input"
	condContext  = "context"
	// placeholderPrefix marks the three names between the two rewrite
	// passes. It cannot come from the user: any name other than the three
	// and locally declared ones is rejected before the rewrite.
	placeholderPrefix = "__sacp_cond_"
)

// Condition is a compiled edge condition: a Rego body over response, input
// and context, prepared once at load.
type Condition struct {
	src   string
	query rego.PreparedEvalQuery
}

// CompileCondition compiles a boolean expression over response, input and
// context, e.g.
//
//	response.status == "success"
//	response.data.score > 0.8
//	count(response.data.guesses) > 0; input.strict == true     (a body: all must hold)
//
// It rejects what would make routing depend on anything but those three
// values: references to data, unknown names, with modifiers, assignments to
// the three names, and non-deterministic or I/O builtins.
func CompileCondition(expr string) (*Condition, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, errors.New("empty condition")
	}
	body, err := ast.ParseBodyWithOpts(expr, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, fmt.Errorf("syntax error: %s", regoErrorText(err))
	}
	if errs := checkCondition(body); len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	body, err = rewriteCondition(body)
	if err != nil {
		return nil, fmt.Errorf("rewriting condition: %w", err)
	}
	q, err := rego.New(
		rego.ParsedQuery(body),
		rego.SetRegoVersion(ast.RegoV1),
		// The check above already refuses these by name; telling the
		// compiler too means a builtin the check missed still cannot run.
		rego.UnsafeBuiltins(deniedBuiltins()),
	).PrepareForEval(context.Background())
	if err != nil {
		return nil, fmt.Errorf("compile error: %s", regoErrorText(err))
	}
	return &Condition{src: expr, query: q}, nil
}

// String returns the source text.
func (c *Condition) String() string {
	if c == nil {
		return ""
	}
	return c.src
}

// Eval reports whether the expression holds for the given JSON-decoded
// values. Rego semantics apply: undefined is false and a defined non-false
// value is true. A nil Condition always holds, matching an edge without
// when. The deadline of ctx is honoured; an expired ctx is an error, not
// false, so that a timeout is never mistaken for a routing decision.
func (c *Condition) Eval(ctx context.Context, response, input, globalContext any) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("condition %q: %w", c.String(), err)
	}
	if c == nil {
		return true, nil
	}
	rs, err := c.query.Eval(ctx, rego.EvalInput(map[string]any{
		condResponse: response,
		condInput:    input,
		condContext:  globalContext,
	}))
	if err != nil {
		return false, fmt.Errorf("condition %q: %w", c.src, err)
	}
	// The rego package captures the value of each top-level comparison
	// instead of failing on false (so that "1 == 2" shows false in a REPL),
	// so a result only means "holds" when none of its expressions is false.
	for _, r := range rs {
		if holds(r) {
			return true, nil
		}
	}
	return false, nil
}

func holds(r rego.Result) bool {
	for _, e := range r.Expressions {
		if b, ok := e.Value.(bool); ok && !b {
			return false
		}
	}
	return true
}

// checkCondition returns every reason body is not an acceptable condition.
func checkCondition(body ast.Body) []string {
	var errs []string
	seen := map[string]bool{}
	add := func(msg string) {
		if !seen[msg] {
			seen[msg] = true
			errs = append(errs, msg)
		}
	}

	// Names declared with some, := or every are local and may be used
	// anywhere in the body; the compiler's own safety check still catches
	// a use outside their scope.
	declared := map[ast.Var]bool{}
	declare := func(t *ast.Term) {
		ast.WalkVars(t, func(v ast.Var) bool {
			switch {
			case v.IsWildcard():
			case isConditionRoot(v):
				add(fmt.Sprintf("%s cannot be assigned or declared: a condition only reads it", v))
			default:
				declared[v] = true
			}
			return false
		})
	}
	ast.WalkExprs(body, func(e *ast.Expr) bool {
		switch t := e.Terms.(type) {
		case *ast.SomeDecl:
			for _, sym := range t.Symbols {
				switch v := sym.Value.(type) {
				case ast.Var:
					declare(sym)
				case ast.Call:
					// some x in xs / some k, v in xs: the last argument
					// is the collection, the others are declared.
					for _, arg := range v[1 : len(v)-1] {
						declare(arg)
					}
				}
			}
		case *ast.Every:
			if t.Key != nil {
				declare(t.Key)
			}
			declare(t.Value)
		}
		if e.IsAssignment() {
			declare(e.Operand(0))
		}
		return false
	})

	var vis *ast.GenericVisitor
	vis = ast.NewGenericVisitor(func(x any) bool {
		switch v := x.(type) {
		case *ast.Expr:
			if len(v.With) > 0 {
				add("with modifiers are not allowed in a condition")
			}
			if v.IsCall() {
				if msg := checkFunction(v.Operator()); msg != "" {
					add(msg)
				}
				// The operator is a function name, not a variable;
				// only the arguments are walked.
				for _, op := range v.Operands() {
					vis.Walk(op)
				}
				return true
			}
		case ast.Call:
			if ref, ok := v[0].Value.(ast.Ref); ok {
				if msg := checkFunction(ref); msg != "" {
					add(msg)
				}
			}
			for _, arg := range v[1:] {
				vis.Walk(arg)
			}
			return true
		case ast.Var:
			switch {
			case v.IsWildcard(), isConditionRoot(v), declared[v]:
			case v.Equal(ast.DefaultRootDocument.Value):
				add("data is not available in a condition: a condition reads response, input and context")
			default:
				add(fmt.Sprintf("unknown name %q: a condition reads response, input and context (declare local names with some, := or every)", string(v)))
			}
		}
		return false
	})
	vis.Walk(body)
	return errs
}

// checkFunction returns why the function named by op may not be called, or
// "" when it may.
func checkFunction(op ast.Ref) string {
	if op.HasPrefix(ast.DefaultRootRef) {
		return "data is not available in a condition: a condition reads response, input and context"
	}
	name := op.String()
	if deniedBuiltin(name) {
		return fmt.Sprintf("function %s is not allowed in a condition: routing must depend only on response, input and context", name)
	}
	return ""
}

// deniedBuiltin reports builtins that are non-deterministic or do I/O: an
// edge condition must give the same answer for the same values, both for
// reproducible runs and so that a condition cannot call out of the gateway.
func deniedBuiltin(name string) bool {
	switch name {
	case "http.send", "opa.runtime", "time.now_ns", "uuid.rfc4122", "trace", "print":
		return true
	}
	if strings.HasPrefix(name, "net.") || strings.HasPrefix(name, "rand.") {
		return true
	}
	b, ok := ast.BuiltinMap[name]
	return ok && b.Nondeterministic
}

// deniedBuiltins is the set of known builtins refused by deniedBuiltin, in
// the form rego.UnsafeBuiltins takes.
func deniedBuiltins() map[string]struct{} {
	out := map[string]struct{}{}
	for _, b := range ast.Builtins {
		if deniedBuiltin(b.Name) {
			out[b.Name] = struct{}{}
		}
	}
	return out
}

func isConditionRoot(v ast.Var) bool {
	switch string(v) {
	case condResponse, condInput, condContext:
		return true
	}
	return false
}

// rewriteCondition turns the free names response, input and context into
// input.response, input.input and input.context, wherever they appear.
//
// It takes two passes because ast.Transform descends into what the
// transformer returns: rewriting response.x to input.response.x in one pass
// would then meet the new head "input" and rewrite it again. The first pass
// renames the three names to placeholders; the second expands placeholders,
// and the "input" heads it creates are not placeholders.
func rewriteCondition(body ast.Body) (ast.Body, error) {
	rename := transformer(func(x any) (any, error) {
		if v, ok := x.(ast.Var); ok && isConditionRoot(v) {
			return ast.Var(placeholderPrefix + string(v)), nil
		}
		return x, nil
	})
	expand := transformer(func(x any) (any, error) {
		switch v := x.(type) {
		case ast.Var:
			if name, ok := strings.CutPrefix(string(v), placeholderPrefix); ok {
				return ast.Ref{ast.InputRootDocument.Copy(), ast.StringTerm(name)}, nil
			}
		case ast.Ref:
			if head, ok := v[0].Value.(ast.Var); ok {
				if name, ok := strings.CutPrefix(string(head), placeholderPrefix); ok {
					out := make(ast.Ref, 0, len(v)+1)
					out = append(out, ast.InputRootDocument.Copy(), ast.StringTerm(name))
					return append(out, v[1:]...), nil
				}
			}
		}
		return x, nil
	})
	var x any = body
	for _, t := range []*transformFunc{rename, expand} {
		var err error
		if x, err = ast.Transform(t, x); err != nil {
			return nil, err
		}
	}
	out, ok := x.(ast.Body)
	if !ok {
		return nil, fmt.Errorf("transform returned %T, not a body", x)
	}
	return out, nil
}

// transformFunc adapts a function to ast.Transformer. ast.Transform does
// not descend into the symbols of a some declaration ("some x in
// response.items"), so the adapter does that itself.
type transformFunc struct {
	f func(any) (any, error)
}

func transformer(f func(any) (any, error)) *transformFunc { return &transformFunc{f: f} }

func (t *transformFunc) Transform(x any) (any, error) {
	if decl, ok := x.(*ast.SomeDecl); ok {
		for _, sym := range decl.Symbols {
			v, err := ast.Transform(t, sym.Value)
			if err != nil {
				return nil, err
			}
			val, ok := v.(ast.Value)
			if !ok {
				return nil, fmt.Errorf("transform returned %T, not a value", v)
			}
			sym.Value = val
		}
		return decl, nil
	}
	return t.f(x)
}

// regoErrorText renders OPA parse and compile errors as "col N: message"
// lists: the condition is one line of the YAML file, so the column is what
// helps, and OPA's own rendering repeats a meaningless file name.
func regoErrorText(err error) string {
	var errs ast.Errors
	if !errors.As(err, &errs) || len(errs) == 0 {
		return err.Error()
	}
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		if e.Location != nil && e.Location.Col > 0 {
			if e.Location.Row > 1 {
				parts = append(parts, fmt.Sprintf("row %d col %d: %s", e.Location.Row, e.Location.Col, e.Message))
			} else {
				parts = append(parts, fmt.Sprintf("col %d: %s", e.Location.Col, e.Message))
			}
			continue
		}
		parts = append(parts, e.Message)
	}
	return strings.Join(parts, "; ")
}
