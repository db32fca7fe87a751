package approval

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Facts the gateway establishes before the policy runs, because the policy
// cannot: whether the target exists, whether the content matches its
// target type's template, and whether the references form a cycle. They are
// input.target, input.content_check and input.references (see factsInput);
// the shipped policy turns them into the violations target.missing,
// content.template and references.cycle. Looking them up can fail (the
// store is Redis): the request is then rejected without asking the policy
// (fail closed, violation facts.unavailable).

// AssignedID is the id the gateway assigns to what an approved CREATE
// creates: "<target_type>-<the 32 hex digits of the request id>", e.g. the
// request req-1d2142b69f881fb0dc843bbfb553ce70 creating a design is
// assigned design-1d2142b69f881fb0dc843bbfb553ce70 ("node-…" when the
// request named no target type).
//
// It is deterministic (the same request always gets the same id, on every
// replica, so a retried step or a reviewer's later approval assigns the
// same one), collision-free (request ids are 128-bit random values the
// store refuses to reuse), a valid catalogue id (so the created
// specification can be registered under it), and it names its request, so
// the gateway can tell whether the target exists without an index.
func AssignedID(targetType, requestID string) string {
	if targetType == "" {
		targetType = "node"
	}
	return targetType + "-" + strings.TrimPrefix(requestID, "req-")
}

var assignedPattern = regexp.MustCompile(`^(architecture|design|code|test|docs|node)-([0-9a-f]{32})$`)

// assignedRequest is AssignedID reversed: the target type and the id of the
// request that was assigned id; false when id is not an assigned id.
func assignedRequest(id string) (targetType, requestID string, ok bool) {
	m := assignedPattern.FindStringSubmatch(id)
	if m == nil {
		return "", "", false
	}
	if m[1] == "node" {
		m[1] = ""
	}
	return m[1], "req-" + m[2], true
}

// assignedFor is the id a request is assigned if approved: only an
// APPROVAL that creates is (a VALIDATE creates nothing).
func assignedFor(id string, req *AgentRequest) string {
	if req.RequestType != TypeApproval || req.Action != ActionCreate {
		return ""
	}
	return AssignedID(req.TargetType, id)
}

// created reports whether rec created the target typ of an assigned id: a
// CREATE whose change was REPORTed done. Approved but not yet reported,
// expired, rejected: nothing was created.
func created(rec *Record, typ string) bool {
	return rec.State == StateCompleted && rec.Request.RequestType == TypeApproval &&
		rec.Request.Action == ActionCreate && rec.Request.TargetType == typ
}

// specTypes are the target types whose targets are specifications: the
// catalogue is their registry, so an id it does not hold (and the gateway
// did not create) does not exist.
var specTypes = []string{"architecture", "design", "docs"}

// facts are the parts of the policy input the gateway looked up.
type facts struct {
	target, content, references map[string]any
}

func (f facts) input() map[string]any {
	return map[string]any{"target": f.target, "content_check": f.content, "references": f.references}
}

// facts establishes the facts of req, which has (or, for a REPORT, is
// about) the request id id.
func (s *Service) facts(ctx context.Context, id string, req *AgentRequest) (facts, error) {
	assigned := assignedFor(id, req)
	target, err := s.targetFact(ctx, req, assigned)
	if err != nil {
		return facts{}, err
	}
	refs, err := s.referencesFact(ctx, req, assigned)
	if err != nil {
		return facts{}, err
	}
	return facts{target: target, content: s.contentFact(req), references: refs}, nil
}

// targetFact is input.target: {type, id, path, assigned_id, checked,
// exists, source}. What "exists" means depends on what the gateway knows:
//
//   - a target_id the catalogue holds exists, whatever the target type
//     (source "catalogue");
//   - a target_id the gateway assigned (AssignedID) exists when its CREATE
//     is COMPLETED and of the same target type (source "gateway"); it is
//     known as long as that record is retained (Deps.Retention), after
//     which only the catalogue knows the target (register it there). A
//     later DELETE of it is not tracked;
//   - any other target_id of a specification type (architecture, design,
//     docs) does not exist: the catalogue is their registry;
//   - any other target_id of code or test, and every target given only by
//     target_path, is not checked (checked: false): the gateway holds no
//     source tree, and catalogue paths are relative to the catalogue, not
//     to the repository an agent writes to.
//
// checked says whether exists means anything; the policy must not read a
// missing target into checked: false. assigned_id is the id an approved
// CREATE gets, so the policy can name its location.
func (s *Service) targetFact(ctx context.Context, req *AgentRequest, assigned string) (map[string]any, error) {
	out := map[string]any{
		"type": req.TargetType, "id": req.TargetID, "path": req.TargetPath, "assigned_id": assigned,
		"checked": false, "exists": false, "source": "",
	}
	id := req.TargetID
	if id == "" {
		return out, nil
	}
	if _, ok := s.cur().cat.Get(id); ok {
		out["checked"], out["exists"], out["source"] = true, true, "catalogue"
		return out, nil
	}
	if typ, rid, ok := assignedRequest(id); ok {
		out["checked"] = true
		rec, err := s.store.Get(ctx, rid)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("target %s: %w", quoteID(id), err)
		case created(rec, typ):
			out["exists"], out["source"] = true, "gateway"
		}
		return out, nil
	}
	if contains(specTypes, req.TargetType) {
		out["checked"] = true
	}
	return out, nil
}

// contentFact is input.content_check: {checked, valid, template, errors,
// reason}. The content of an APPROVAL or VALIDATE that creates or modifies
// is checked against its target type's template; anything else is not
// (checked: false, valid: null) and reason says why, including "no
// template for this target type".
func (s *Service) contentFact(req *AgentRequest) map[string]any {
	out := map[string]any{"checked": false, "valid": nil, "template": "", "errors": []any{}, "reason": ""}
	switch {
	case req.RequestType != TypeApproval && req.RequestType != TypeValidate:
		out["reason"] = "only the content of an APPROVAL or VALIDATE is a change to check"
		return out
	case req.Action != ActionCreate && req.Action != ActionModify:
		out["reason"] = "a " + req.Action + " carries no content to check"
		return out
	}
	t, ok := s.cur().cat.Template(req.TargetType)
	if !ok {
		out["reason"] = fmt.Sprintf("no content template for target type %q (%s/%s.json in the catalogue)", req.TargetType, templatesDir, req.TargetType)
		return out
	}
	errs := t.Check(req.Content)
	out["checked"], out["valid"], out["template"], out["errors"] = true, len(errs) == 0, t.Name, strs(errs)
	return out
}

// Bounds of following references: the catalogue is in memory, records are
// store reads (each one a Redis round trip).
const (
	maxRefNodes   = 10000
	maxRefLookups = 64
)

// referencesFact is input.references: {checked, cycle, through_target,
// complete}. The request is a node whose edges are its references; a
// catalogue specification's edges are its front matter's references, and
// a target the gateway created (AssignedID, COMPLETED) has its CREATE's
// references. The node of the request is its target: the id it will be
// assigned (a CREATE), else its target_id; a modify's references replace
// the target's own. cycle is the first cycle found following the
// references depth first, in order, as the ids along it with the first
// repeated at the end (["design-1", "arch-001", "design-1"]); empty when
// there is none. through_target says whether the cycle passes through the
// request's target (the request would close it) or was already there.
// complete is false when the bounds stopped the walk before it was done.
// Only an APPROVAL or VALIDATE is checked: a REPORT's references are those
// approved, a QUERY's are not links.
func (s *Service) referencesFact(ctx context.Context, req *AgentRequest, assigned string) (map[string]any, error) {
	out := map[string]any{"checked": false, "cycle": []any{}, "through_target": false, "complete": true}
	if req.RequestType != TypeApproval && req.RequestType != TypeValidate {
		return out, nil
	}
	out["checked"] = true
	start := assigned
	if start == "" {
		start = req.TargetID
	}
	if start == "" {
		// A target without an id cannot be referenced: no cycle can pass
		// through it, but its references may lead into one.
		start = "(this request)"
	}
	g := refGraph{s: s, ctx: ctx}
	cycle, complete, err := g.findCycle(start, dedupe(req.References))
	if err != nil {
		return nil, err
	}
	if len(cycle) > 0 {
		out["cycle"], out["through_target"] = strs(cycle), cycle[0] == start
	}
	out["complete"] = complete
	return out, nil
}

// refGraph reads the edges of the reference graph.
type refGraph struct {
	s       *Service
	ctx     context.Context
	lookups int
}

// edges returns n's references; false when finding them would exceed the
// lookup bound.
func (g *refGraph) edges(n string) ([]string, bool, error) {
	if spec, ok := g.s.cur().cat.Get(n); ok {
		return spec.References, true, nil
	}
	typ, rid, ok := assignedRequest(n)
	if !ok {
		return nil, true, nil // unknown: the references rule judges it
	}
	if g.lookups >= maxRefLookups {
		return nil, false, nil
	}
	g.lookups++
	rec, err := g.s.store.Get(g.ctx, rid)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("reference %s: %w", quoteID(n), err)
	case !created(rec, typ):
		return nil, true, nil
	}
	return rec.Request.References, true, nil
}

// findCycle walks depth first from start, whose edges are refs, and returns
// the first cycle met, with its first node repeated at the end.
func (g *refGraph) findCycle(start string, refs []string) (cycle []string, complete bool, err error) {
	const (
		open = 1 // on the current path
		done = 2 // fully explored, no cycle through it
	)
	type frame struct {
		node string
		next []string
	}
	color := map[string]int{start: open}
	stack := []frame{{start, refs}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if len(top.next) == 0 {
			color[top.node] = done
			stack = stack[:len(stack)-1]
			continue
		}
		n := top.next[0]
		top.next = top.next[1:]
		switch color[n] {
		case open:
			i := 0
			for stack[i].node != n {
				i++
			}
			for _, f := range stack[i:] {
				cycle = append(cycle, f.node)
			}
			return append(cycle, n), true, nil
		case done:
			continue
		}
		if len(color) >= maxRefNodes {
			return nil, false, nil
		}
		next, ok, err := g.edges(n)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			return nil, false, nil
		}
		color[n] = open
		stack = append(stack, frame{n, next})
	}
	return nil, true, nil
}

// dedupe drops repeated references, keeping the first of each.
func dedupe(v []string) []string {
	seen := make(map[string]bool, len(v))
	out := make([]string, 0, len(v))
	for _, s := range v {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
