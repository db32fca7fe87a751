package policy

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
)

// ChatRequest is a chat request body the gateway's strict reader accepted,
// placed as input.request of a chat decision: a JSON object whose
// "messages" member is an array of Messages (at least one) objects. The
// engine converts Body as it converts RawJSON, and may rely on the two
// guarantees: the residual partial evaluation leaves of a chat policy is
// simplified once per agent with them as knowns, so the shipped policy's
// shape checks are settled at load and what is left reads only the number
// of messages. Only the reader may build one: a ChatRequest whose Body
// breaks the guarantees gets decisions of the policy as if it held them.
type ChatRequest struct {
	Body     []byte
	Messages int
	// Value, when set, is Body as the engine would convert it, built by
	// an InputBuilder during the reader's own pass over Body, so that a
	// decision that reads the request does not parse it a second time.
	// Nil: the engine converts Body when a decision reads it.
	Value any
}

// What the reader guarantees, as the residual sees it: the input document
// itself, input.request (an object) and input.request.messages (an array
// of at least one element).
type readerValue int

const (
	rvNone readerValue = iota
	rvInput
	rvRequest
	rvMessages
)

var (
	requestRef  = ast.InputRootRef.Append(ast.StringTerm("request"))
	messagesRef = requestRef.Append(ast.StringTerm("messages"))
	// countRef is what a rewritten residual reads in place of
	// count(input.request.messages): the only member of the input it is
	// evaluated with.
	countRef = ast.InputRootRef.Append(ast.StringTerm("message_count"))
)

// readerPath is how a chat decision is made for one agent when the input
// carries a ChatRequest: the residual with the reader's guarantees applied.
// Either its value is known (constant), or it depends only on the number
// of messages: it is then computed once per number, by the rewritten
// residual, and remembered.
type readerPath struct {
	constant bool
	value    any       // constant: the decision's value
	residual *residual // otherwise: reads input.message_count only
	byCount  sync.Map  // int → any: the decision's value for that many messages
	n        atomic.Int64
}

// maxCounts bounds the message counts remembered per agent; past it, a
// decision evaluates the rewritten residual without remembering.
const maxCounts = 1024

// readerPathFor simplifies pt's residual with the reader's guarantees.
// Nil when pt is not the chat decision, or when the residual reads the
// request in any way besides the shape the reader guarantees and the
// number of messages (a rule that reads what a message says): the residual
// then decides as before.
func (p *prepared) readerPathFor(ctx context.Context, pt point, body ast.Body, support []*ast.Module, result ast.Var) *readerPath {
	if pt != ptChat {
		return nil
	}
	rbody, rsupport, ok := underReader(body, support)
	if !ok {
		return nil
	}
	r, err := p.compileResidual(rbody, rsupport, false, result)
	if err != nil {
		return nil
	}
	reads, _ := residualRefs(rbody, rsupport)
	if reads {
		return &readerPath{residual: r}
	}
	out := evalQuery(ctx, r.compiler, p, &r.q, pt, nil)
	if out.err != nil {
		return nil
	}
	return &readerPath{constant: true, value: out.value}
}

// known is the decision for a request of n messages when it needs no
// evaluation: the path's constant, or the value computed for n before.
func (rp *readerPath) known(n int) (any, bool) {
	if rp.constant {
		return rp.value, true
	}
	return rp.byCount.Load(n)
}

// decide is the decision for a request of n messages; ok is false when the
// rewritten residual failed (the caller then evaluates as before, so that
// the failure is reported with the policy's own rules).
func (rp *readerPath) decide(ctx context.Context, p *prepared, n int) (any, bool) {
	if v, ok := rp.known(n); ok {
		return v, true
	}
	in := ast.NewObject([2]*ast.Term{ast.StringTerm("message_count"), ast.IntNumberTerm(n)})
	out := evalQuery(ctx, rp.residual.compiler, p, &rp.residual.q, ptChat, in)
	if out.err != nil {
		return nil, false
	}
	// The rewritten residual is deterministic (partialSafe) and reads
	// nothing but n: its value for n never changes.
	if rp.n.Add(1) <= maxCounts {
		rp.byCount.Store(n, out.value)
	}
	return out.value, true
}

// underReader rewrites a residual (its query and support rules) with the
// reader's guarantees as knowns: a type check of input, input.request or
// input.request.messages is settled (dropping the check when it holds, the
// rule when it fails), object.get of a guaranteed member is that member,
// and count(input.request.messages) becomes input.message_count. ok is
// false when anything else reads the input: those residuals are left
// alone.
func underReader(body ast.Body, support []*ast.Module) (ast.Body, []*ast.Module, bool) {
	if readsReader(body, nil) {
		return nil, nil, false
	}
	out := make([]*ast.Module, len(support))
	for i, m := range support {
		m = m.Copy()
		rules := m.Rules[:0]
		for _, r := range m.Rules {
			keep, ok := ruleUnderReader(r)
			if !ok {
				return nil, nil, false
			}
			if keep {
				rules = append(rules, r)
			} else if r.Head.RuleKind() == ast.MultiValue {
				// A set whose every rule is dropped is still the empty
				// set, not undefined: keep the rule, never satisfied.
				r.Head.Key = ast.StringTerm("")
				r.Body = ast.NewBody(ast.NewExpr(ast.BooleanTerm(false)))
				rules = append(rules, r)
			} else if len(r.Head.Args) > 0 {
				return nil, nil, false // a function's calls still need it
			}
		}
		m.Rules = rules
		out[i] = m
	}
	return body.Copy(), out, true
}

// ruleUnderReader rewrites r's body in place. keep is false when a
// settled check fails (the rule can never be satisfied); ok is false when
// the rule reads the input in a way the guarantees do not settle.
func ruleUnderReader(r *ast.Rule) (keep, ok bool) {
	if r.Else != nil || readsReader(r.Head, nil) {
		return false, false
	}
	known := map[ast.Var]readerValue{}
	exprs := make([]*ast.Expr, 0, len(r.Body))
	for _, e := range r.Body {
		drop, holds, rewritten, ok := exprUnderReader(e, known)
		switch {
		case !ok:
			return false, false
		case !holds:
			return false, true
		case rewritten != nil:
			exprs = append(exprs, rewritten)
		case !drop:
			exprs = append(exprs, e)
		}
	}
	// The head may name a variable bound to a guaranteed value only
	// through what the body dropped.
	if readsReader(r.Head, known) {
		return false, false
	}
	if len(exprs) == 0 {
		exprs = append(exprs, ast.NewExpr(ast.BooleanTerm(true)))
	}
	for i, e := range exprs {
		e.Index = i
	}
	r.Body = exprs
	return true, true
}

// exprUnderReader settles one expression of a residual rule. drop: it
// holds and is not needed; holds false: it fails; rewritten: its
// replacement; ok false: it reads the input otherwise.
func exprUnderReader(e *ast.Expr, known map[ast.Var]readerValue) (drop, holds bool, rewritten *ast.Expr, ok bool) {
	if len(e.With) > 0 {
		return false, false, nil, !readsReader(e, known)
	}
	switch ts := e.Terms.(type) {
	case *ast.Term:
		t, c, ok := settle(ts, known)
		switch {
		case !ok:
			return false, false, nil, false
		case c != rvNone:
			// A guaranteed value is defined and not false.
			return true, !e.Negated, nil, true
		}
		if b, isBool := t.Value.(ast.Boolean); isBool {
			return true, bool(b) != e.Negated, nil, true
		}
		out := e.Copy()
		out.Terms = t
		return false, true, out, true
	case []*ast.Term:
		if e.IsEquality() && !e.Negated {
			if ok := bindGuaranteed(ts[1], ts[2], known); ok {
				return true, true, nil, true
			}
		}
		t, c, ok := settle(ast.CallTerm(ts...), known)
		if !ok || c != rvNone {
			return false, false, nil, false
		}
		if b, isBool := t.Value.(ast.Boolean); isBool {
			return true, bool(b) != e.Negated, nil, true
		}
		out := e.Copy()
		out.Terms = []*ast.Term(t.Value.(ast.Call))
		return false, true, out, true
	}
	return false, false, nil, !readsReader(e, known)
}

// bindGuaranteed handles v = x (either way round) where x is a guaranteed
// value: v is known to be it from then on, and the expression is dropped.
func bindGuaranteed(a, b *ast.Term, known map[ast.Var]readerValue) bool {
	for _, pair := range [2][2]*ast.Term{{a, b}, {b, a}} {
		v, isVar := pair[0].Value.(ast.Var)
		if !isVar || known[v] != rvNone || v.Equal(ast.InputRootDocument.Value) {
			continue
		}
		if _, c, ok := settle(pair[1], known); ok && c != rvNone {
			known[v] = c
			return true
		}
	}
	return false
}

// settle rewrites t with the reader's guarantees: a type check of a
// guaranteed value becomes its answer, count(input.request.messages)
// becomes input.message_count, and c says which guaranteed value t is
// (input, input.request, input.request.messages, or object.get of one
// from the other), rvNone for any other term. ok is false when t reads the
// input, or a guaranteed value, in any other way.
func settle(t *ast.Term, known map[ast.Var]readerValue) (_ *ast.Term, c readerValue, ok bool) {
	switch v := t.Value.(type) {
	case ast.Var:
		if v.Equal(ast.InputRootDocument.Value) {
			return t, rvInput, true
		}
		return t, known[v], true
	case ast.Ref:
		switch {
		case v.Equal(ast.InputRootRef):
			return t, rvInput, true
		case v.Equal(requestRef):
			return t, rvRequest, true
		case v.Equal(messagesRef):
			return t, rvMessages, true
		}
		return t, rvNone, !readsReader(t, known)
	case ast.Call:
		return settleCall(t, v, known)
	case *ast.Array:
		out := make([]*ast.Term, v.Len())
		for i := range out {
			e, c, ok := settle(v.Elem(i), known)
			if !ok || c != rvNone {
				return nil, rvNone, false
			}
			out[i] = e
		}
		return ast.ArrayTerm(out...), rvNone, true
	}
	return t, rvNone, !readsReader(t, known)
}

// settleCall is settle for a call.
func settleCall(t *ast.Term, call ast.Call, known map[ast.Var]readerValue) (*ast.Term, readerValue, bool) {
	op, isRef := call[0].Value.(ast.Ref)
	if !isRef {
		return t, rvNone, !readsReader(t, known)
	}
	args := call[1:]
	first := rvNone
	if len(args) > 0 {
		var ok bool
		if _, first, ok = settle(args[0], known); !ok {
			return nil, rvNone, false
		}
	}
	switch {
	case first == rvNone:
	case op.Equal(ast.IsObject.Ref()) && len(args) == 1:
		return ast.BooleanTerm(first == rvInput || first == rvRequest), rvNone, true
	case op.Equal(ast.IsArray.Ref()) && len(args) == 1:
		return ast.BooleanTerm(first == rvMessages), rvNone, true
	case op.Equal(ast.Count.Ref()) && len(args) == 1 && first == rvMessages:
		return ast.NewTerm(countRef.Copy()), rvNone, true
	case op.Equal(ast.ObjectGet.Ref()) && len(args) == 3 && first == rvInput && args[1].Equal(ast.StringTerm("request")):
		return t, rvRequest, true
	case op.Equal(ast.ObjectGet.Ref()) && len(args) == 3 && first == rvRequest && args[1].Equal(ast.StringTerm("messages")):
		return t, rvMessages, true
	default:
		return nil, rvNone, false
	}
	out := make([]*ast.Term, len(call))
	out[0] = call[0]
	for i, a := range args {
		s, c, ok := settle(a, known)
		if !ok || c != rvNone {
			return nil, rvNone, false
		}
		out[i+1] = s
	}
	return ast.CallTerm(out...), rvNone, true
}

// readsReader reports whether x reads the input, or a variable bound to
// one of its guaranteed values, anywhere.
func readsReader(x any, known map[ast.Var]readerValue) bool {
	found := false
	ast.WalkTerms(x, func(t *ast.Term) bool {
		switch v := t.Value.(type) {
		case ast.Ref:
			if v.HasPrefix(ast.InputRootRef) {
				found = true
			}
			if h, isVar := v[0].Value.(ast.Var); isVar && known[h] != rvNone {
				found = true
			}
		case ast.Var:
			if v.Equal(ast.InputRootDocument.Value) || known[v] != rvNone {
				found = true
			}
		}
		return found
	})
	return found
}

// ChatReadsRequest reports whether a chat decision for agent (its input.agent
// as the gateway passes it, preconverted) reads the request beyond what the
// strict reader guarantees, so that the reader should build the request's
// value in its own pass (ChatRequest.Value): a rule that reads what the
// messages say, a decision evaluated in full, or shadow policies, which get
// the whole input. False when the decision is settled without the request's
// value (a constant, or decided by the number of messages). It is advice:
// a decision without a Value converts Body as before.
func (e *Engine) ChatReadsRequest(agent any) bool {
	p := e.live.Load()
	switch {
	case e.shadowJobs != nil:
		return true
	case p.constant[ptChat] != nil:
		return false
	case e.opts.noPartial || !p.partialOK[ptChat]:
		return true
	}
	a, ok := agent.(ast.Object)
	if !ok {
		return true
	}
	v, ok := p.fast.byAgent[ptChat].Load(a)
	if !ok {
		return true
	}
	fp := v.(*fastPath)
	return fp.kind != pathConstant && fp.reader == nil
}
