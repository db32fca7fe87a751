package policy

import (
	"strconv"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// An MCP request is a handful of scalars (the method, the server, the
// tool's name and annotations, whether mcp_tools name it), and the shipped
// MCP policy's residual reads a few of them and nothing else: its value
// for an agent is a function of those few values. Such a residual is
// evaluated once per distinct combination and remembered, so that a tool
// call neither converts its input (its arguments included) nor runs OPA.
// The residual is deterministic (partialSafe) and the policy set's data does
// not change while it serves, so a remembered value never goes stale; a
// reload starts from new fast paths.

// memoPath remembers a residual's values by what it reads of the input.
type memoPath struct {
	// paths are where the residual reads the input: each a member path
	// below input, read as input.a.b or object.get(input, ["a", "b"], _).
	paths [][]string
	mu    sync.RWMutex
	byKey map[string]any // memoKey → the decision's value
}

// Bounds on what one agent's memo holds: past maxMemoKeys values, or for a
// key longer than maxMemoKeyLen (a policy reading a long string), the
// residual is evaluated without remembering.
const (
	maxMemoKeys   = 1024
	maxMemoKeyLen = 1024
)

// memoPathFor is how pt's residual may be remembered: nil unless pt is the
// MCP decision and the residual reads the input only at fixed member paths.
func memoPathFor(pt point, body ast.Body, support []*ast.Module) *memoPath {
	if pt != ptMCP {
		return nil
	}
	paths, ok := inputPaths(body, support)
	if !ok || len(paths) == 0 {
		return nil
	}
	return &memoPath{paths: paths}
}

// inputPaths lists the member paths at which the residual reads the
// input; ok is false when it reads it in any other way (the input as a
// whole, a member chosen at run time, an expression with `with`).
func inputPaths(body ast.Body, support []*ast.Module) (paths [][]string, ok bool) {
	seen := map[string]bool{}
	ok = true
	add := func(p []string) {
		if k := strings.Join(p, "\x00"); !seen[k] {
			seen[k] = true
			paths = append(paths, p)
		}
	}
	var vis *ast.GenericVisitor
	vis = ast.NewGenericVisitor(func(x any) bool {
		if !ok {
			return true
		}
		switch v := x.(type) {
		case *ast.Expr:
			if len(v.With) > 0 {
				ok = false
				return true
			}
			if ts, isCall := v.Terms.([]*ast.Term); isCall {
				return objectGetOfInput(ts, add, vis, &ok)
			}
		case ast.Call:
			return objectGetOfInput(v, add, vis, &ok)
		case ast.Ref:
			if !v.HasPrefix(ast.InputRootRef) {
				return false
			}
			p, ground := memberPath(v[1:])
			if !ground || len(p) == 0 {
				ok = false
				return true
			}
			add(p)
			return true
		case ast.Var:
			// The input anywhere else: read as a whole.
			ok = ok && !v.Equal(ast.InputRootDocument.Value)
		}
		return false
	})
	vis.Walk(body)
	for _, m := range support {
		for _, r := range m.Rules {
			vis.Walk(r)
		}
	}
	return paths, ok
}

// objectGetOfInput handles a call: object.get(input, path, default) (and
// its form with the output as a fourth term) reads the input at path when
// path is a member name or an array of member names; its other terms are
// walked as usual. It reports whether the visitor is done with the call.
func objectGetOfInput(call []*ast.Term, add func([]string), vis *ast.GenericVisitor, ok *bool) bool {
	if len(call) < 4 || len(call) > 5 || !isInput(call[1]) {
		return false
	}
	if op, isRef := call[0].Value.(ast.Ref); !isRef || !op.Equal(ast.ObjectGet.Ref()) {
		return false
	}
	var p []string
	switch k := call[2].Value.(type) {
	case ast.String:
		p = []string{string(k)}
	case *ast.Array:
		terms := make([]*ast.Term, k.Len())
		for i := range terms {
			terms[i] = k.Elem(i)
		}
		var ground bool
		if p, ground = memberPath(terms); !ground {
			p = nil
		}
	}
	if len(p) == 0 {
		*ok = false
		return true
	}
	add(p)
	for _, t := range call[3:] {
		vis.Walk(t)
	}
	return true
}

// isInput reports whether t is the input document itself.
func isInput(t *ast.Term) bool {
	switch v := t.Value.(type) {
	case ast.Var:
		return v.Equal(ast.InputRootDocument.Value)
	case ast.Ref:
		return v.Equal(ast.InputRootRef)
	}
	return false
}

// memberPath is terms as member names; ground is false when one is not a
// string.
func memberPath(terms []*ast.Term) (p []string, ground bool) {
	p = make([]string, len(terms))
	for i, t := range terms {
		s, isString := t.Value.(ast.String)
		if !isString {
			return nil, false
		}
		p[i] = string(s)
	}
	return p, true
}

// key appends to b what the residual can see of input: the value at each
// path, tagged with its type. ok is false when the residual could see more
// than the key says (a value that is not a string, boolean or null, a
// path through anything but an object), or the key is too long: the
// residual is then evaluated.
func (mp *memoPath) key(b []byte, input map[string]any) ([]byte, bool) {
	for _, p := range mp.paths {
		var ok bool
		if b, ok = appendMember(b, input, p); !ok || len(b) > maxMemoKeyLen {
			return b, false
		}
	}
	return b, true
}

// appendMember appends the value at path p below v to b: "a" when it is
// absent, "z" for null, "t" or "f" for a boolean, "s" and the length and
// the text for a string.
func appendMember(b []byte, v any, p []string) ([]byte, bool) {
	for _, name := range p {
		var found bool
		switch o := v.(type) {
		case map[string]any:
			v, found = o[name]
		case ast.Object:
			if t := o.Get(ast.InternedTerm(name)); t != nil {
				v, found = t.Value, true
			}
		default:
			return b, false
		}
		if !found {
			return append(b, 'a'), true
		}
	}
	switch s := v.(type) {
	case nil, ast.Null:
		return append(b, 'z'), true
	case bool:
		return appendBool(b, s), true
	case ast.Boolean:
		return appendBool(b, bool(s)), true
	case string:
		return appendString(b, s), true
	case ast.String:
		return appendString(b, string(s)), true
	}
	return b, false
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 't')
	}
	return append(b, 'f')
}

func appendString(b []byte, s string) []byte {
	b = append(b, 's')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// remember keeps the residual's value for key, while there is room.
func (mp *memoPath) remember(key []byte, v any) {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	if mp.byKey == nil {
		mp.byKey = map[string]any{}
	}
	if len(mp.byKey) < maxMemoKeys {
		mp.byKey[string(key)] = v
	}
}

// memoKey appends input's key in fp's memo to b; memo is false when fp has
// none or input's key cannot stand for it.
func memoKey(b []byte, fp *fastPath, input map[string]any) (key []byte, memo bool) {
	if fp.memo == nil {
		return b, false
	}
	return fp.memo.key(b, input)
}

// memoized is the value fp's memo holds for key.
func (fp *fastPath) memoized(key []byte, memo bool) (any, bool) {
	if !memo {
		return nil, false
	}
	fp.memo.mu.RLock()
	defer fp.memo.mu.RUnlock()
	v, ok := fp.memo.byKey[string(key)] // no copy of key for a lookup
	return v, ok
}
