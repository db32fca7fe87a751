package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/sacpgw/gateway/internal/roster"
	sj "github.com/sacpgw/gateway/internal/strictjson"
)

// The fast path (a decision settled per agent by partial evaluation, or its
// residual) must decide exactly as evaluating the whole policy does. These
// tests run a corpus of requests through two engines on the same policies,
// one with the fast path and one without, and compare every decision.

// diffAgents are the agents of the differential corpus, preconverted as
// the gateway's stages pass them.
func diffAgents() []any {
	as := testAgents()
	as["tagged"] = &roster.Agent{ID: "tagged", Type: "reviewer", Capabilities: []string{"read"}, Profile: roster.Profile{Tags: []string{"eu", "batch"}},
		Models: []string{"gpt-4o-mini"}, MaxRequestSize: 4096}
	as["bare"] = &roster.Agent{ID: "bare"}
	out := make([]any, 0, len(as))
	for _, id := range []string{"claude-3", "copilot-2", "gemini-pro", "tagged", "bare"} {
		out = append(out, Preconvert(AgentInput(as[id])))
	}
	return out
}

// diffChatRequests are chat request bodies: ordinary, long, with content a
// policy may look for, and malformed shapes the strict reader would refuse
// (the policies still see them in tests).
func diffChatRequests() []string {
	msgs := func(n int, content string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"role":"user","content":%q}`, content)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return []string{
		`{"model":"gpt-4o-mini","messages":` + msgs(1, "hi") + `}`,
		`{"model":"gpt-4o","messages":` + msgs(4, "write a function") + `,"temperature":0.2,"user":"u-1"}`,
		`{"model":"gpt-4o","messages":` + msgs(3, "my password is hunter2") + `}`,
		`{"model":"gpt-4o-mini","messages":` + msgs(1001, "x") + `}`,
		`{"model":"gpt-4o-mini","messages":[]}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"BEGIN PRIVATE KEY"}]}]}`,
		`{"model":"gpt-4o-mini"}`,
		`{"model":"gpt-4o-mini","messages":"hi"}`,
		`[]`,
		`"just a string"`,
	}
}

// chatCorpus is every agent × request × model × dialect of the corpus.
func chatCorpus() []map[string]any {
	var in []map[string]any
	for _, agent := range diffAgents() {
		for _, body := range diffChatRequests() {
			for _, model := range []string{"gpt-4o-mini", "gpt-4o"} {
				for _, dialect := range []string{"chat", "anthropic"} {
					in = append(in, map[string]any{"agent": agent, "request": RawJSON(body), "model": model, "dialect": dialect})
				}
			}
		}
	}
	return in
}

// Paths of the reader's guarantees, as counted by chatDecisionsAgree
// beside the fast path kinds.
const (
	readerConstant = 10 + iota
	readerCounted
)

// readerRequest is body as the gateway's strict reader passes it when the
// reader would accept it (an object whose messages are an array of one or
// more objects); ok is false otherwise.
func readerRequest(body RawJSON) (ChatRequest, bool) {
	var req struct {
		Messages []map[string]any `json:"messages"`
	}
	var obj map[string]any
	if json.Unmarshal(body, &obj) != nil || json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
		return ChatRequest{}, false
	}
	for _, m := range req.Messages {
		if m == nil {
			return ChatRequest{}, false
		}
	}
	return ChatRequest{Body: body, Messages: len(req.Messages)}, true
}

// builtRequest is read with its Value built by the strict reader's pass.
func builtRequest(t *testing.T, read ChatRequest) ChatRequest {
	t.Helper()
	b := NewInputBuilder()
	defer b.Release()
	if err := sj.CheckInto(read.Body, nil, b); err != nil {
		t.Fatalf("%s: %v", read.Body, err)
	}
	read.Value = b.Value()
	if read.Value == nil {
		t.Fatalf("%s: no value built", read.Body)
	}
	return read
}

// chatDecisionsAgree runs the corpus through a fast and a reference engine
// on dir and fails on the first decision they do not agree on: each input
// as is, and, when the strict reader would accept its request, with the
// request as the reader passes it (a ChatRequest, to the fast engine
// only). It returns how many decisions took each path.
func chatDecisionsAgree(t *testing.T, dir string) map[int]int {
	t.Helper()
	fast := newEngine(t, Options{Dir: dir, NoWatch: true})
	full := newEngine(t, Options{Dir: dir, NoWatch: true, noPartial: true})
	ctx := context.Background()
	paths := map[int]int{}
	for _, in := range chatCorpus() {
		// The fast engine decides each input twice: the first decision of
		// an agent starts the partial evaluation, the second uses its
		// result.
		for i := range 2 {
			got, want := bothDecide(t, fast, full, i == 1, func(e *Engine) (ChatDecision, error) { return e.ChatDeny(ctx, in) })
			if !sameChat(got, want) {
				t.Fatalf("%s: input %s:\nfast %+v\nfull %+v", dir, describe(in), got, want)
			}
			if got.Revision != fast.Revision() || !idPattern.MatchString(got.DecisionID) {
				t.Fatalf("decision without its id and revision: %+v", got)
			}
			read, ok := readerRequest(in["request"].(RawJSON))
			if !ok {
				continue
			}
			asRead := maps.Clone(in)
			asRead["request"] = read
			if got, _ := fast.ChatDeny(ctx, asRead); !sameChat(got, want) ||
				got.Revision != fast.Revision() || !idPattern.MatchString(got.DecisionID) {
				t.Fatalf("%s: input %s as read:\nfast %+v\nfull %+v", dir, describe(in), got, want)
			}
			// And with the value the reader's pass built (what the
			// gateway passes when ChatReadsRequest says the decision
			// reads the request).
			asRead["request"] = builtRequest(t, read)
			if got, _ := fast.ChatDeny(ctx, asRead); !sameChat(got, want) ||
				got.Revision != fast.Revision() || !idPattern.MatchString(got.DecisionID) {
				t.Fatalf("%s: input %s as read, value built:\nfast %+v\nfull %+v", dir, describe(in), got, want)
			}
		}
		fp := fast.live.Load().fastPathFor(ptChat, in)
		paths[fp.kind]++
		if _, ok := readerRequest(in["request"].(RawJSON)); ok && fp.reader != nil {
			if fp.reader.constant {
				paths[readerConstant]++
			} else {
				paths[readerCounted]++
			}
		}
	}
	return paths
}

// bothDecide decides with the fast and the reference engine; settled waits
// first for the partial evaluations the fast engine's earlier decisions
// started, so that the fast engine uses what they settled.
func bothDecide[D any](t *testing.T, fast, full *Engine, settled bool, decide func(*Engine) (D, error)) (got, want D) {
	t.Helper()
	if settled {
		fast.live.Load().fast.pending.Wait()
	}
	got, err := decide(fast)
	if err != nil {
		t.Fatalf("fast: %v", err)
	}
	if want, err = decide(full); err != nil {
		t.Fatalf("full: %v", err)
	}
	return got, want
}

func sameChat(a, b ChatDecision) bool {
	return a.Deny == b.Deny && reflect.DeepEqual(a.Reasons, b.Reasons) && a.FailClosed == b.FailClosed && a.Error == b.Error
}

func describe(in map[string]any) string {
	body := string(in["request"].(RawJSON))
	if len(body) > 120 {
		body = body[:120] + "…"
	}
	agent := fmt.Sprint(in["agent"])
	if len(agent) > 80 {
		agent = agent[:80] + "…"
	}
	return fmt.Sprintf("agent=%s model=%v dialect=%v request=%s", agent, in["model"], in["dialect"], body)
}

func TestFastPathAgreesOnTheShippedPolicies(t *testing.T) {
	paths := chatDecisionsAgree(t, defaultDir)
	if paths[pathResidual] == 0 {
		t.Errorf("the shipped chat policy reads the messages: want a residual per agent, got paths %v", paths)
	}
	// With the strict reader's guarantees the residual reads nothing but
	// the number of messages.
	if paths[readerCounted] == 0 || paths[readerConstant] != 0 {
		t.Errorf("the shipped chat policy as read: want decided by the number of messages, got paths %v", paths)
	}
}

// TestReaderDecidesByTheNumberOfMessages: for a request the strict reader
// passed, the shipped chat policy is decided from the number of messages
// alone, computed once per number and agent; the body is not converted.
func TestReaderDecidesByTheNumberOfMessages(t *testing.T) {
	e := newEngine(t, Options{Dir: defaultDir, NoWatch: true})
	ctx := context.Background()
	agent := Preconvert(AgentInput(testAgents()["claude-3"]))
	in := func(n int) map[string]any {
		// A body that is not JSON: only the number of messages is read.
		return map[string]any{"agent": agent, "model": "m", "dialect": "chat", "request": ChatRequest{Body: []byte("not json"), Messages: n}}
	}
	_, _ = e.ChatDeny(ctx, in(1)) // starts the agent's partial evaluation
	e.live.Load().fast.pending.Wait()
	for _, tc := range []struct {
		n    int
		deny bool
	}{{1, false}, {1000, false}, {1001, true}, {1001, true}, {5000, true}} {
		d, err := e.ChatDeny(ctx, in(tc.n))
		if err != nil || d.Deny != tc.deny || d.FailClosed || d.Revision != e.Revision() {
			t.Fatalf("%d messages: %+v %v, want deny %v", tc.n, d, err, tc.deny)
		}
		if tc.deny && !reflect.DeepEqual(d.Reasons, []string{fmt.Sprintf("the conversation has %d messages, over the limit of 1000", tc.n)}) {
			t.Errorf("%d messages: reasons %v", tc.n, d.Reasons)
		}
	}
	fp := e.live.Load().fastPathFor(ptChat, in(1))
	if fp.reader == nil || fp.reader.n.Load() != 4 {
		t.Errorf("want the decisions of 4 distinct counts remembered, got %+v", fp.reader)
	}
	// The same body as RawJSON (not vouched for by the reader) is read,
	// and fails closed.
	raw := in(1)
	raw["request"] = RawJSON("not json")
	if d, _ := e.ChatDeny(ctx, raw); !d.Deny || !d.FailClosed {
		t.Errorf("unread body: %+v, want a fail-closed denial", d)
	}
}

// chatRuleTemplates are rules of the chat policy reading the agent, the
// request or both, in the forms partial evaluation must get right: set and
// complete rules, defaults, functions, negation, iteration, comprehension,
// conflicts (an error on some inputs), else.
var chatRuleTemplates = []func(r *rand.Rand) string{
	func(r *rand.Rand) string {
		return fmt.Sprintf("deny contains \"type %[1]s\" if input.agent.type == %[1]q\n", pick(r, "reviewer", "code-generator", "nobody"))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("deny contains \"capability\" if %q in input.agent.capabilities\n", pick(r, "write", "suggest", "validate"))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("deny contains sprintf(\"%%d messages\", [count(input.request.messages)]) if count(input.request.messages) > %d\n", r.IntN(5))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("deny contains \"model\" if {\n\tinput.agent.type == %q\n\tinput.model != \"gpt-4o-mini\"\n}\n", pick(r, "reviewer", "code-completer"))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("deny contains \"content\" if {\n\tsome m in input.request.messages\n\tcontains(lower(m.content), %q)\n}\n", pick(r, "password", "hunter2", "function"))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("deny contains \"dialect\" if {\n\tstartswith(input.agent.id, %q)\n\tinput.dialect == \"anthropic\"\n}\n", pick(r, "c", "g", "t"))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("_size(x) := n if n := count(x)\n\ndeny contains \"capabilities\" if _size(input.agent.capabilities) > %d\n", r.IntN(4))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("default _limit := 2\n\n_limit := 10 if input.agent.type == %q\n\ndeny contains \"limit\" if count(input.request.messages) > _limit\n", pick(r, "reviewer", "code-generator"))
	},
	func(*rand.Rand) string { return "deny contains \"untagged\" if count(input.agent.tags) == 0\n" },
	func(r *rand.Rand) string {
		return fmt.Sprintf("deny contains sprintf(\"user %%s\", [input.request.user]) if input.agent.id == %q\n", pick(r, "claude-3", "tagged"))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("_c := 1 if input.agent.type == %q\n\n_c := 2 if count(input.request.messages) > 2\n\ndeny contains \"conflict\" if _c > 0\n", pick(r, "reviewer", "code-generator"))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("_tier := \"gold\" if input.agent.id == %q\n\nelse := \"basic\" if input.model == \"gpt-4o\"\n\nelse := \"none\"\n\ndeny contains _tier if _tier != \"none\"\n", pick(r, "claude-3", "bare"))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("deny contains \"roles\" if {\n\troles := {m.role | some m in input.request.messages}\n\tcount(roles) > %d\n\t%q in input.agent.tags\n}\n", r.IntN(2), pick(r, "eu", "us"))
	},
	func(*rand.Rand) string {
		return "deny contains \"shape\" if not is_object(object.get(input, \"request\", null))\n"
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("deny contains \"no messages\" if {\n\tis_object(input.request)\n\tnot is_array(object.get(input.request, \"messages\", null))\n\tinput.agent.type == %q\n}\n", pick(r, "reviewer", "code-generator"))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("deny contains \"long for %[1]s\" if {\n\tinput.agent.type == %[1]q\n\tmsgs := input.request.messages\n\tis_array(msgs)\n\tcount(msgs) >= %[2]d\n}\n", pick(r, "reviewer", "code-generator"), 1+r.IntN(4))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf("deny contains \"all models\" if {\n\tevery m in input.agent.models { m != %q }\n\tcount(input.agent.models) > 0\n}\n", pick(r, "gpt-4o", "gpt-4o-mini"))
	},
}

func pick(r *rand.Rand, s ...string) string { return s[r.IntN(len(s))] }

// writeChatPolicy writes the shipped chat entrypoint and, as rule packages,
// the given rules.
func writeChatPolicy(t *testing.T, dir string, rules []string) {
	t.Helper()
	entry := "package gateway.chat\n\nimport data.gateway.rules.chat as rules\n\n" +
		"deny contains reason if {\n\tsome reason in rules[_].deny\n}\n"
	write(t, dir, "chat/chat.rego", entry)
	for i, r := range rules {
		write(t, dir, fmt.Sprintf("rules/r%d.rego", i), fmt.Sprintf("package gateway.rules.chat.r%d\n\n%s", i, r))
	}
}

func TestFastPathAgreesOnGeneratedPolicies(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 1))
	total := map[int]int{}
	for i := range 40 {
		var rules []string
		for range 1 + r.IntN(4) {
			rules = append(rules, chatRuleTemplates[r.IntN(len(chatRuleTemplates))](r))
		}
		dir := t.TempDir()
		writeChatPolicy(t, dir, rules)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			for k, n := range chatDecisionsAgree(t, dir) {
				total[k] += n
			}
		})
	}
	// The generated set must exercise every path, or the test shows less
	// than it claims.
	for _, k := range []int{pathConstant, pathResidual, readerConstant, readerCounted} {
		if total[k] == 0 {
			t.Errorf("no generated decision took path %d: %v", k, total)
		}
	}
}

func TestAgentOnlyPolicyIsDecidedOncePerAgent(t *testing.T) {
	dir := t.TempDir()
	writeChatPolicy(t, dir, []string{"deny contains \"reviewers may not chat\" if input.agent.type == \"reviewer\"\n"})
	e := newEngine(t, Options{Dir: dir, NoWatch: true})
	ctx := context.Background()
	agents := map[string]any{}
	for id, a := range testAgents() {
		agents[id] = Preconvert(AgentInput(a))
	}
	in := func(agent string) map[string]any {
		return map[string]any{"agent": agents[agent], "request": RawJSON(`{"messages":[]}`), "model": "m", "dialect": "chat"}
	}
	for agent, want := range map[string]bool{"gemini-pro": true, "claude-3": false} {
		d, err := e.ChatDeny(ctx, in(agent))
		if err != nil || d.Deny != want {
			t.Fatalf("%s: %+v %v, want deny %v", agent, d, err, want)
		}
		if d.Deny && !reflect.DeepEqual(d.Reasons, []string{"reviewers may not chat"}) {
			t.Errorf("reasons %v", d.Reasons)
		}
		e.live.Load().fast.pending.Wait()
		if k := e.live.Load().fastPathFor(ptChat, in(agent)).kind; k != pathConstant {
			t.Errorf("%s: path %d, want constant", agent, k)
		}
		again, _ := e.ChatDeny(ctx, in(agent))
		if again.Deny != want || again.DecisionID == d.DecisionID || again.Revision != e.Revision() {
			t.Errorf("%s: decided %+v, then %+v", agent, d, again)
		}
	}
	// The request body is not even read: a body that is not JSON changes
	// nothing for a decision settled by the agent alone.
	bad := in("claude-3")
	bad["request"] = RawJSON(`not json`)
	if d, _ := e.ChatDeny(ctx, bad); d.Deny {
		t.Errorf("constant decision read the request: %+v", d)
	}
	// An agent passed as a plain map (not preconverted) is evaluated in full.
	plain := in("claude-3")
	plain["agent"] = AgentInput(testAgents()["claude-3"])
	if k := e.live.Load().fastPathFor(ptChat, plain).kind; k != pathFull {
		t.Errorf("plain agent map: path %d, want full", k)
	}
	// A member the partial evaluation did not consider: evaluated in full.
	extra := in("claude-3")
	extra["surprise"] = true
	if k := e.live.Load().fastPathFor(ptChat, extra).kind; k != pathFull {
		t.Errorf("unknown input member: path %d, want full", k)
	}
}

func TestNondeterministicPolicyIsEvaluatedPerRequest(t *testing.T) {
	dir := t.TempDir()
	writeChatPolicy(t, dir, []string{
		"deny contains \"odd nanosecond\" if {\n\tinput.agent.type == \"reviewer\"\n\ttime.now_ns() % 2 == 1\n}\n",
	})
	e := newEngine(t, Options{Dir: dir, NoWatch: true})
	in := map[string]any{"agent": Preconvert(AgentInput(testAgents()["gemini-pro"])), "request": RawJSON(`{"messages":[]}`), "model": "m", "dialect": "chat"}
	if k := e.live.Load().fastPathFor(ptChat, in).kind; k != pathFull {
		t.Fatalf("policy calling time.now_ns: path %d, want full evaluation per request", k)
	}
	// Per request: over a few hundred decisions, both answers occur.
	seen := map[bool]bool{}
	for range 400 {
		d, _ := e.ChatDeny(context.Background(), in)
		seen[d.Deny] = true
	}
	if !seen[true] || !seen[false] {
		t.Errorf("a per-request decision came out the same 400 times: %v", seen)
	}
}

// TestFastPathFollowsReload: a reload replaces the policies, and with them
// what was settled per agent.
func TestFastPathFollowsReload(t *testing.T) {
	dir := t.TempDir()
	writeChatPolicy(t, dir, []string{"deny contains \"no reviewers\" if input.agent.type == \"reviewer\"\n"})
	e := newEngine(t, Options{Dir: dir, NoWatch: true})
	in := map[string]any{"agent": Preconvert(AgentInput(testAgents()["gemini-pro"])), "request": RawJSON(`{"messages":[]}`), "model": "m", "dialect": "chat"}
	ctx := context.Background()
	before, _ := e.ChatDeny(ctx, in)
	e.live.Load().fast.pending.Wait()
	if !before.Deny {
		t.Fatalf("before the reload: %+v", before)
	}
	writeChatPolicy(t, dir, []string{"deny contains \"no coders\" if input.agent.type == \"code-generator\"\n"})
	if err := e.Reload(); err != nil {
		t.Fatal(err)
	}
	// The agent seen before the reload is settled for the new policies
	// before they serve.
	if k := e.live.Load().fastPathFor(ptChat, in).kind; k != pathConstant {
		t.Errorf("after the reload: path %d, want constant", k)
	}
	after, _ := e.ChatDeny(ctx, in)
	if after.Deny || after.Revision == before.Revision {
		t.Fatalf("after the reload: %+v (before %+v)", after, before)
	}
}

// TestFastPathAgreesOnMessages runs the shipped messages policy's
// decisions through both engines.
func TestFastPathAgreesOnMessages(t *testing.T) {
	fast := newEngine(t, Options{Dir: defaultDir, NoWatch: true})
	full := newEngine(t, Options{Dir: defaultDir, NoWatch: true, noPartial: true})
	ctx := context.Background()
	for _, agent := range diffAgents() {
		for _, to := range []string{"claude-3", "pp", "tagged"} {
			for _, allowed := range []bool{true, false} {
				in := map[string]any{"agent": agent, "authz": AuthzInput(Authz{Allowed: allowed, Reason: "no role"}),
					"message":   map[string]any{"sender": "claude-3", "recipient": to, "type": "request", "plan_verbs": []any{"predict", "search"}},
					"recipient": map[string]any{"id": to, "supported_verbs": []any{"predict"}}}
				got, _ := fast.MessagesDeny(ctx, in)
				want, _ := full.MessagesDeny(ctx, in)
				if !sameChat(got, want) {
					t.Fatalf("messages %v: fast %+v, full %+v", in["message"], got, want)
				}
			}
		}
	}
}

// mcpCorpus is MCP requests as the MCP door passes them, and shapes it
// never would (the policy still must decide them the same both ways):
// every method class, listed or not, annotated destructive or not, and
// members missing or of the wrong type.
func mcpCorpus() []map[string]any {
	tools := []any{
		map[string]any{"name": "read_file", "annotations": map[string]any{"readOnlyHint": true}},
		map[string]any{"name": "delete_file", "description": "Deletes a file.", "annotations": map[string]any{"destructiveHint": true}},
		map[string]any{"name": "move_file", "annotations": map[string]any{"destructiveHint": false}},
		map[string]any{"name": "rm", "annotations": map[string]any{"destructiveHint": "true"}},
		map[string]any{"name": "touch", "annotations": nil},
		map[string]any{"name": 7},
		"not a tool",
		nil, // no tool member
		// As the MCP door passes a tool: its annotations converted from
		// the server's JSON. Names that differ only in where one string
		// ends and the next begins must not share a remembered decision.
		map[string]any{"name": "wipe", "description": "", "annotations": mustJSONInput(`{"destructiveHint":true}`)},
		map[string]any{"name": "wipe", "description": "", "annotations": mustJSONInput(`{"destructiveHint":false,"title":"t"}`)},
		map[string]any{"name": "s4:wipe", "annotations": mustJSONInput(`{"destructiveHint":null}`)},
		map[string]any{"name": "wipe", "annotations": mustJSONInput(`{"destructiveHint":"true"}`)},
		map[string]any{"name": "wipe", "annotations": mustJSONInput(`{"destructiveHint":{"x":1}}`)},
	}
	authz := []any{AuthzInput(Authz{Allowed: true}), AuthzInput(Authz{Allowed: false, Reason: "no"}),
		map[string]any{"allowed": "true"}, nil}
	var in []map[string]any
	for _, method := range []any{"tools/call", "tools/list", "resources/read", "resources/list", "prompts/get",
		"sampling/createMessage", "", 42, nil} {
		for _, tool := range tools {
			for _, az := range authz {
				x := map[string]any{"server": "fs", "arguments": RawJSON(`{"path":"a.txt"}`)}
				for k, v := range map[string]any{"method": method, "tool": tool, "authz": az} {
					if v != nil {
						x[k] = v
					}
				}
				in = append(in, x)
			}
		}
	}
	in = append(in, map[string]any{}, map[string]any{"method": "resources/read", "resource": map[string]any{"uri": "file:///a"}, "authz": AuthzInput(Authz{Allowed: true})},
		map[string]any{"method": "prompts/get", "prompt": map[string]any{"name": "p"}, "arguments": RawJSON(`{}`), "authz": AuthzInput(Authz{Allowed: true})})
	return in
}

// mcpDecisionsAgree runs every agent × mcpCorpus request through a fast and
// a reference engine on dir and fails on the first decision they do not
// agree on. It returns how many decisions took each path and how many had
// each outcome.
func mcpDecisionsAgree(t *testing.T, dir string) (paths map[int]int, decisions map[string]int) {
	t.Helper()
	fast := newEngine(t, Options{Dir: dir, NoWatch: true})
	full := newEngine(t, Options{Dir: dir, NoWatch: true, noPartial: true})
	ctx := context.Background()
	paths, decisions = map[int]int{}, map[string]int{}
	for _, agent := range diffAgents() {
		for _, req := range mcpCorpus() {
			in := maps.Clone(req)
			in["agent"] = agent
			// As in chatDecisionsAgree: the second decision uses what the
			// first one's partial evaluation settled, the third what the
			// second one remembered.
			for i := range 3 {
				got, want := bothDecide(t, fast, full, i > 0, func(e *Engine) (MCPDecision, error) { return e.MCP(ctx, in) })
				if got.Decision != want.Decision || got.Reason != want.Reason || got.FailClosed != want.FailClosed || got.Error != want.Error {
					t.Fatalf("%s: mcp %v:\nfast %+v\nfull %+v", dir, in, got, want)
				}
				if got.Revision != fast.Revision() || !idPattern.MatchString(got.DecisionID) {
					t.Fatalf("decision without its id and revision: %+v", got)
				}
				decisions[got.Decision]++
				if got.FailClosed {
					decisions["fail closed"]++
				}
			}
			p := fast.live.Load()
			fp := p.fastPathFor(ptMCP, in)
			paths[fp.kind]++
			if fp.kind == pathResidual && residualDecides(t, p, fp, in) {
				// A residual that fails is evaluated again in full: count
				// the decisions the residual made on its own.
				paths[residualDecided]++
			}
			if key, memo := memoKey(nil, fp, in); memo {
				if _, ok := fp.memoized(key, memo); ok {
					paths[memoDecided]++
				}
			}
		}
	}
	return paths, decisions
}

// residualDecided counts, beside the fast path kinds, the residuals that
// decided without falling back to full evaluation; memoDecided the
// decisions a residual's remembered value made.
const (
	residualDecided = 20
	memoDecided     = 21
)

func mustJSONInput(s string) ast.Value {
	v, err := JSONInput([]byte(s))
	if err != nil {
		panic(err)
	}
	return v
}

func residualDecides(t *testing.T, p *prepared, fp *fastPath, in map[string]any) bool {
	t.Helper()
	v, err := inputValue(in)
	if err != nil {
		t.Fatal(err)
	}
	return evalQuery(context.Background(), fp.residual.compiler, p, &fp.residual.q, ptMCP, v).err == nil
}

// TestFastPathAgreesOnMCP: the shipped MCP policy is settled per agent
// (its residual decides each call, not the whole policy), and decides every
// request of the corpus as full evaluation does, refusals included.
func TestFastPathAgreesOnMCP(t *testing.T) {
	paths, decisions := mcpDecisionsAgree(t, defaultDir)
	if paths[pathFull] != 0 || paths[pathResidual] == 0 || paths[residualDecided] != paths[pathResidual] {
		t.Errorf("the shipped MCP policy: want every call decided by the agent's residual, got paths %v", paths)
	}
	// The residual reads a few scalars: a call of the MCP door's shape is
	// decided by the value remembered for them.
	if paths[memoDecided] == 0 {
		t.Errorf("the shipped MCP policy: want calls decided by remembered values, got paths %v", paths)
	}
	// The corpus must reach every outcome, or it shows less than it claims.
	for _, d := range []string{MCPAllow, MCPDeny, MCPEscalate} {
		if decisions[d] == 0 {
			t.Errorf("no decision %s in the corpus: %v", d, decisions)
		}
	}
}

// TestFastPathKeepsConflicts: a decision picked from a set whose rules may
// both hold has one residual query per rule; folded into one, two that
// agree still decide, and two that do not are still a conflict (the
// decision fails closed), exactly as in full evaluation.
func TestFastPathKeepsConflicts(t *testing.T) {
	dir := t.TempDir()
	writeChatPolicy(t, dir, nil)
	write(t, dir, "mcp/mcp.rego", `package gateway.mcp

_outcomes contains {"decision": "allow", "reason": ""} if input.authz.allowed == true

_outcomes contains {"decision": "allow", "reason": ""} if input.agent.type == "reviewer"

_outcomes contains {"decision": "deny", "reason": "no rm"} if input.tool.name == "rm"

_outcomes contains {"decision": "deny", "reason": "not listed"} if {
	not input.authz.allowed == true
	input.agent.type != "reviewer"
}

decision := d if {
	some d in _outcomes
}
`)
	paths, decisions := mcpDecisionsAgree(t, dir)
	if paths[pathResidual] == 0 {
		t.Errorf("want residuals, got paths %v", paths)
	}
	if decisions[MCPAllow] == 0 || decisions["fail closed"] == 0 {
		t.Errorf("the corpus must reach agreeing and conflicting rules: %v", decisions)
	}
}

// TestContentPolicyExample checks the example policy that reads every
// message (docs/examples): it refuses a conversation carrying a private
// key, and the fast path agrees with full evaluation on the corpus.
func TestContentPolicyExample(t *testing.T) {
	dir := t.TempDir()
	writeChatPolicy(t, dir, nil)
	write(t, dir, "rules/content.rego", string(readExample(t, "chat-content-policy.rego")))
	e := newEngine(t, Options{Dir: dir, NoWatch: true})
	in := map[string]any{"agent": Preconvert(AgentInput(testAgents()["claude-3"])), "model": "m", "dialect": "chat",
		"request": RawJSON(`{"messages":[{"role":"user","content":"-----BEGIN PRIVATE KEY-----\nMIIE"}]}`)}
	d, _ := e.ChatDeny(context.Background(), in)
	if !d.Deny || len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "private key") {
		t.Fatalf("%+v", d)
	}
	chatDecisionsAgree(t, dir)
}

func readExample(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A decision known before the request came (the shipped chat policy under
// the reader's guarantees) evaluates nothing, so the engine's evaluation
// timeout must not cost it a context and a timer: at 128 connections that
// was a timer armed and stopped for every chat request.
func TestReaderDecisionArmsNoTimer(t *testing.T) {
	allocs := func(o Options) float64 {
		eval := settledReaderEval(t, newEngine(t, o))
		if err := eval(); err != nil { // the count's value is computed once
			t.Fatal(err)
		}
		return testing.AllocsPerRun(200, func() { _ = eval() })
	}
	without := allocs(Options{Dir: defaultDir, NoWatch: true})
	with := allocs(Options{Dir: defaultDir, NoWatch: true, Timeout: time.Second})
	if with > without {
		t.Errorf("a decided decision allocates %v times with an evaluation timeout, %v without", with, without)
	}
}

// The reader builds the request's value only for the agents whose chat
// decision reads it: a rule that reads what the messages say, not the
// shipped policy, which the number of messages decides.
func TestChatReadsRequest(t *testing.T) {
	shipped := newEngine(t, Options{Dir: defaultDir, NoWatch: true})
	dir := t.TempDir()
	writeChatPolicy(t, dir, nil)
	write(t, dir, "rules/content.rego", string(readExample(t, "chat-content-policy.rego")))
	content := newEngine(t, Options{Dir: dir, NoWatch: true})
	agent := Preconvert(AgentInput(testAgents()["claude-3"]))
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	in := map[string]any{"agent": agent, "model": "m", "dialect": "chat", "request": ChatRequest{Body: body, Messages: 1}}
	for name, c := range map[string]struct {
		e    *Engine
		want bool
	}{"shipped": {shipped, false}, "content": {content, true}} {
		// Before the agent's partial evaluation the decision is made in
		// full, and reads the request.
		if !c.e.ChatReadsRequest(agent) {
			t.Errorf("%s: an unsettled agent's decision does not read the request", name)
		}
		if _, err := c.e.ChatDeny(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		c.e.live.Load().fast.pending.Wait()
		if got := c.e.ChatReadsRequest(agent); got != c.want {
			t.Errorf("%s: ChatReadsRequest %v, want %v", name, got, c.want)
		}
	}
	if !content.ChatReadsRequest(AgentInput(testAgents()["claude-3"])) {
		t.Error("an agent not preconverted is evaluated in full, and reads the request")
	}
}
