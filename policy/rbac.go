package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"

	"github.com/sacpgw/gateway/internal/roster"
)

// DefaultRBACModel is the casbin model of config/rbac_model.conf (without
// its comments), used when NewRBAC gets no model path. The file documents
// the subjects, objects and policy lines.
const DefaultRBACModel = `[request_definition]
r = sub, obj, act

[policy_definition]
p = sub, obj, act

[role_definition]
g = _, _
g2 = _, _

[policy_effect]
e = some(where (p.eft == allow))

[matchers]
m = g(r.sub, p.sub) && (p.act == "*" || r.act == p.act || (p.act == "send:*" && keyMatch(r.act, p.act))) && (p.obj == "*" || r.obj == p.obj || (p.obj == "target:*" && g2(r.sub, r.obj)) || (p.obj == "agent:*" && keyMatch(r.obj, p.obj)))
`

// Approval actions (the approval protocol's AgentRequest.action, plus query
// for QUERY requests, which name no action).
const (
	ActionRead   = "read"
	ActionQuery  = "query"
	ActionCreate = "create"
	ActionModify = "modify"
	ActionDelete = "delete"
)

// Escalation actions of people (admin may do anything, these included).
const (
	ActionList   = "list"
	ActionDecide = "decide"
)

// targetTypes are the approval protocol's target types (the configuration
// defines them); allowed_targets [all] is all of them.
var targetTypes = roster.TargetTypes()

// capabilityActions maps a capability to the approval actions it grants.
// Capabilities not listed (analyze, suggest, validate, ...) grant none.
var capabilityActions = map[string][]string{
	"read":  {ActionRead, ActionQuery},
	"write": {ActionCreate, ActionModify, ActionDelete},
}

// targetless actions need no target type.
var targetless = map[string]bool{ActionQuery: true}

// TargetTypes returns the approval protocol's target types.
func TargetTypes() []string { return slices.Clone(targetTypes) }

// CapabilityFor returns the capability an approval action needs ("" for an
// unknown action).
func CapabilityFor(action string) string {
	for c, acts := range capabilityActions {
		if slices.Contains(acts, action) {
			return c
		}
	}
	return ""
}

// ActionFor maps an approval protocol request to the action RBAC checks:
// "query" for a QUERY, else the request's action, lowercased (VALIDATE checks
// the action it proposes; a REPORT should be checked with the approved
// request's action).
func ActionFor(requestType, action string) string {
	if strings.EqualFold(requestType, "QUERY") {
		return ActionQuery
	}
	return strings.ToLower(action)
}

// Authz is an RBAC verdict; it is passed to Rego as input.authz.
type Authz struct {
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason"`
}

// RBAC answers who may do what: agents on approval targets (from
// agents.yaml: capabilities and allowed_targets) and people on escalations
// (admin, reviewer). It is immutable after NewRBAC and safe for concurrent
// use; build a new one when agents.yaml changes.
type RBAC struct {
	e         *casbin.Enforcer
	agents    map[string]*roster.Agent
	reviewers map[string]bool
	// messages memoizes AuthorizeMessage: its verdict depends only on the
	// policy lines, fixed for this RBAC's life (a reload builds a new
	// one), and casbin's evaluation costs about 130 allocations. At most
	// maxMessageVerdicts entries: actions are the agents' to choose.
	messages     sync.Map // messageKey -> Authz
	messageCount atomic.Int64
}

type messageKey struct{ sender, recipient, action string }

const maxMessageVerdicts = 4096

// NewRBAC builds the enforcer from the model file (empty modelPath: the
// built-in DefaultRBACModel) and a policy generated from agents and the
// reviewers' names (see config/rbac_model.conf).
func NewRBAC(modelPath string, agents map[string]*roster.Agent, reviewers []string) (*RBAC, error) {
	var (
		m   model.Model
		err error
	)
	if modelPath == "" {
		m, err = model.NewModelFromString(DefaultRBACModel)
	} else {
		m, err = model.NewModelFromFile(modelPath)
	}
	if err != nil {
		return nil, fmt.Errorf("rbac model %s: %w", displayModel(modelPath), err)
	}
	e, err := casbin.NewEnforcer(m)
	if err != nil {
		return nil, fmt.Errorf("rbac: %w", err)
	}
	e.EnableLog(false)
	e.EnableAutoSave(false)

	var p, g, g2 [][]string
	caps := make([]string, 0, len(capabilityActions))
	for c := range capabilityActions {
		caps = append(caps, c)
	}
	sort.Strings(caps)
	for _, c := range caps {
		for _, act := range capabilityActions[c] {
			obj := "target:*"
			if targetless[act] {
				obj = "*"
			}
			p = append(p, []string{"cap:" + c, obj, act})
		}
	}
	p = append(p,
		[]string{"role:admin", "escalations", "*"},
		[]string{"role:reviewer", "escalations", ActionList},
		[]string{"role:reviewer", "escalations", ActionRead},
		[]string{"role:reviewer", "escalations", ActionDecide},
	)
	for _, t := range targetTypes {
		g2 = append(g2, []string{"target:all", "target:" + t})
	}
	ids := make([]string, 0, len(agents))
	for id := range agents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := agents[id]
		if a == nil {
			return nil, fmt.Errorf("rbac: agent %q has no entry", id)
		}
		for _, c := range a.Capabilities {
			g = append(g, []string{"agent:" + id, "cap:" + c})
		}
		for _, t := range a.AllowedTargets {
			g2 = append(g2, []string{"agent:" + id, "target:" + t})
		}
		p = append(p, messageRules(id, a.Messages)...)
	}
	rv := make(map[string]bool, len(reviewers))
	for _, name := range reviewers {
		rv[name] = true
		g = append(g, []string{"person:" + name, "role:reviewer"})
	}
	if _, err := e.AddPolicies(dedup(p)); err != nil {
		return nil, fmt.Errorf("rbac policy: %w", err)
	}
	if len(g) > 0 {
		if _, err := e.AddGroupingPolicies(dedup(g)); err != nil {
			return nil, fmt.Errorf("rbac roles: %w", err)
		}
	}
	if _, err := e.AddNamedGroupingPolicies("g2", dedup(g2)); err != nil {
		return nil, fmt.Errorf("rbac targets: %w", err)
	}
	return &RBAC{e: e, agents: agents, reviewers: rv}, nil
}

func displayModel(p string) string {
	if p == "" {
		return "(built in)"
	}
	return p
}

// dedup drops repeated rules (a capability listed twice), which casbin
// would refuse as a batch.
func dedup(rules [][]string) [][]string {
	seen := make(map[string]bool, len(rules))
	out := rules[:0]
	for _, r := range rules {
		k := strings.Join(r, "\x00")
		if !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	return out
}

// Authorize decides whether agent agentID may perform action (read, query,
// create, modify, delete; see ActionFor) on target (an approval protocol
// target type; may be empty for query). A denial's Reason names what is
// missing: the agent, the capability or the target.
func (r *RBAC) Authorize(agentID, action, target string) Authz {
	a := r.agents[agentID]
	if a == nil {
		return Authz{Reason: fmt.Sprintf("agent %q is not registered", agentID)}
	}
	act := strings.ToLower(action)
	capability := CapabilityFor(act)
	if capability == "" {
		return Authz{Reason: fmt.Sprintf("unknown action %q (want read, query, create, modify or delete)", action)}
	}
	obj := "*"
	if target != "" || !targetless[act] {
		if !slices.Contains(targetTypes, target) {
			if target == "" {
				return Authz{Reason: fmt.Sprintf("action %q needs a target type", act)}
			}
			return Authz{Reason: fmt.Sprintf("unknown target type %q (want %s)", target, strings.Join(targetTypes, ", "))}
		}
		obj = "target:" + target
	}
	ok, err := r.e.Enforce("agent:"+agentID, obj, act)
	if err != nil {
		return Authz{Reason: "rbac error: " + err.Error()}
	}
	if ok {
		if obj == "*" {
			return Authz{Allowed: true, Reason: fmt.Sprintf("agent %q may %s (capability %q)", agentID, act, capability)}
		}
		return Authz{Allowed: true, Reason: fmt.Sprintf("agent %q may %s %s (capability %q)", agentID, act, target, capability)}
	}
	// Explain the denial from the same facts the policy was built from.
	if !slices.Contains(a.Capabilities, capability) {
		return Authz{Reason: fmt.Sprintf("agent %q lacks capability %q required for action %q (has %s)", agentID, capability, act, listOrNone(a.Capabilities))}
	}
	if obj != "*" && !slices.Contains(a.AllowedTargets, target) && !slices.Contains(a.AllowedTargets, "all") {
		return Authz{Reason: fmt.Sprintf("target type %q is not in allowed_targets of agent %q (%s)", target, agentID, listOrNone(a.AllowedTargets))}
	}
	return Authz{Reason: fmt.Sprintf("agent %q may not %s %s", agentID, act, target)}
}

// messageRules are the policy lines of an agent's messages rules: subject
// the agent itself, object agent:<recipient> (agent:* any, broadcast for a
// message without recipient), action send:<action> (send:* any).
func messageRules(id string, rules []roster.MessageRule) [][]string {
	var p [][]string
	for _, r := range rules {
		for _, to := range r.To {
			obj := "agent:" + to
			if to == "broadcast" {
				obj = "broadcast"
			}
			for _, act := range r.Actions {
				p = append(p, []string{"agent:" + id, obj, "send:" + act})
			}
		}
	}
	return p
}

// AuthorizeMessage decides whether agent sender may send an envelope with
// action to recipient ("" for a broadcast) through POST /relay/messages.
func (r *RBAC) AuthorizeMessage(sender, recipient, action string) Authz {
	k := messageKey{sender, recipient, action}
	if v, ok := r.messages.Load(k); ok {
		return v.(Authz)
	}
	az := r.authorizeMessage(sender, recipient, action)
	if r.messageCount.Load() < maxMessageVerdicts {
		if _, loaded := r.messages.LoadOrStore(k, az); !loaded {
			r.messageCount.Add(1)
		}
	}
	return az
}

func (r *RBAC) authorizeMessage(sender, recipient, action string) Authz {
	if r.agents[sender] == nil {
		return Authz{Reason: fmt.Sprintf("agent %q is not registered", sender)}
	}
	obj, to := "agent:"+recipient, fmt.Sprintf("agent %q", recipient)
	if recipient == "" {
		obj, to = "broadcast", "everyone (broadcast)"
	}
	ok, err := r.e.Enforce("agent:"+sender, obj, "send:"+action)
	if err != nil {
		return Authz{Reason: "rbac error: " + err.Error()}
	}
	if ok {
		return Authz{Allowed: true, Reason: fmt.Sprintf("agent %q may send %q to %s", sender, action, to)}
	}
	return Authz{Reason: fmt.Sprintf("agent %q may not send %q to %s (no messages rule in agents.yaml allows it)", sender, action, to)}
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// AuthorizePerson decides whether a person may perform action (list, read,
// decide, or anything for admin) on escalations. role is "admin",
// "reviewer", or the name of a configured reviewer.
func (r *RBAC) AuthorizePerson(role, action string) bool {
	var sub string
	switch {
	case role == "admin" || role == "reviewer":
		sub = "role:" + role
	case r.reviewers[role]:
		sub = "person:" + role
	default:
		return false
	}
	ok, err := r.e.Enforce(sub, "escalations", strings.ToLower(action))
	return err == nil && ok
}

// RBACFor builds the RBAC of a configuration: the model file of its
// directory (or the built-in one, the same as the shipped file) and policy
// lines from the agents and the reviewers.
func RBACFor(dir string, agents map[string]*roster.Agent, reviewers []string) (*RBAC, error) {
	model := filepath.Join(dir, "rbac_model.conf")
	if _, err := os.Stat(model); os.IsNotExist(err) {
		model = ""
	}
	rbac, err := NewRBAC(model, agents, reviewers)
	if err != nil {
		return nil, fmt.Errorf("rbac: %w", err)
	}
	return rbac, nil
}
