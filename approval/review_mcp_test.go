package approval

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// mcpSHA is a well-formed arguments_sha256 (the page shows it, the door
// binds the grant to it; its value does not matter here).
const mcpSHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// mcpCall is a tool call's content in the shape the MCP door writes
// (mcp/grants.go, review.content: RFC 8785, members in name order), with
// HTML in the description, an annotation and an argument.
const mcpCall = `{"annotations":{"destructiveHint":true,"openWorldHint":false,"title":"Delete <a file>"},` +
	`"arguments":{"path":"<script>alert(1)</script>.txt","reason":"[REDACTED:email] asked","recursive":false},` +
	`"arguments_sha256":"` + mcpSHA + `","description":"Deletes a file. <img src=x onerror=alert(2)>",` +
	`"method":"tools/call","server":"files","tool":"delete_file"}`

// escalateMCP opens an MCP_TOOL_CALL escalation as the door does
// (approval.Service.Open), with content, and returns its id.
func escalateMCP(t *testing.T, h *harness, content string) string {
	t.Helper()
	rec, err := h.svc.Escalate(t.Context(), ExternalRequest{Type: TypeMCP, AgentID: "coder", SessionID: "mcp-1",
		Action: "call MCP tool files/delete_file", Content: content,
		Reason: `tool "delete_file" is annotated destructiveHint: true: a person must approve this call`})
	if err != nil {
		t.Fatal(err)
	}
	return rec.ID
}

// between returns what follows the first start in body up to the next
// end: one element's markup, so that a check cannot pass on text that
// sits elsewhere on the page.
func between(t *testing.T, body, start, end string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, start)
	if !ok {
		t.Fatalf("the page has no %s:\n%s", start, body)
	}
	part, _, ok := strings.Cut(rest, end)
	if !ok {
		t.Fatalf("%s is not closed by %s", start, end)
	}
	return part
}

// TestReviewPageShowsMCPToolCall: the review page of an escalated tool
// call names the server, the tool, its description and title, lists the
// annotations (those the server left out as not stated, the destructive
// one flagged), shows every argument escaped, the arguments' SHA-256 and
// what an approval lets through, all before the raw content; the buttons
// say what they do to a tool call; after approval the grant's end is
// shown.
func TestReviewPageShowsMCPToolCall(t *testing.T) {
	h := newHarness(t)
	id := escalateMCP(t, h, mcpCall)
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokReviewer}}, "")
	res, body := b.get("/review/" + id)
	if res.StatusCode != 200 {
		t.Fatalf("page: %d %s", res.StatusCode, body)
	}

	for _, want := range []string{
		`<code id="mcp-server">files</code>`,
		`<code id="mcp-tool">delete_file</code> <span class="muted" id="mcp-title">(Delete &lt;a file&gt;)</span>`,
		`<td id="mcp-description">Deletes a file. &lt;img src=x onerror=alert(2)&gt;</td>`,
		`<code id="mcp-args-sha" class="hash">` + mcpSHA + `</code>`,
		`Approve: this exact call may run once when the agent sends it again (APPROVED).`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") || strings.Contains(body, "<a file>") {
		t.Error("HTML from the content reached the page unescaped")
	}

	ann := between(t, body, `<ul id="mcp-annotations" class="hints">`, `</ul>`)
	for _, want := range []string{
		`<li class="hint-warn"><code>destructiveHint</code>: <b>true</b><span class="flag">destructive</span></li>`,
		`<li><code>readOnlyHint</code>: <span class="muted">not stated</span> <span class="muted">(MCP&#39;s default: false)</span></li>`,
		`<li><code>idempotentHint</code>: <span class="muted">not stated</span>`,
		`<li><code>openWorldHint</code>: <b>false</b></li>`,
	} {
		if !strings.Contains(ann, want) {
			t.Errorf("annotations lack %s:\n%s", want, ann)
		}
	}
	if strings.Count(ann, "hint-warn") != 1 || strings.Contains(ann, "title") {
		t.Errorf("only destructiveHint is flagged, and the title is not a hint:\n%s", ann)
	}

	args := between(t, body, `<table id="mcp-arguments" class="args">`, `</table>`)
	for _, want := range []string{
		`<th scope="row"><code>path</code></th><td><pre>&#34;&lt;script&gt;alert(1)&lt;/script&gt;.txt&#34;</pre></td>`,
		`<th scope="row"><code>reason</code></th><td><pre>&#34;[REDACTED:email] asked&#34;</pre></td>`,
		`<th scope="row"><code>recursive</code></th><td><pre>false</pre></td>`,
	} {
		if !strings.Contains(args, want) {
			t.Errorf("arguments lack %s:\n%s", want, args)
		}
	}

	grant := between(t, body, `<p class="grant" id="mcp-grant">`, `</p>`)
	if !strings.Contains(grant, "exactly this call (agent coder, the same tool, the same arguments and _meta) through once") ||
		!strings.Contains(grant, "within 1 d of the approval") {
		t.Errorf("grant line %q", grant)
	}
	// The decision first, then what an approval lets through, the tool
	// call, and the raw content, which stays on the page: it is what the
	// decision's SHA-256 binds.
	order := []string{`id="approve"`, `id="mcp-grant"`, `id="mcp-server"`, `id="mcp-annotations"`, `id="mcp-arguments"`, `id="mcp-args-sha"`, `<pre id="content">`, `id="request"`}
	last := -1
	for _, mark := range order {
		i := strings.Index(body, mark)
		if i < 0 || i < last {
			t.Errorf("%s is missing or out of the order %v", mark, order)
		}
		last = i
	}

	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token")
	}
	b.post("/review/"+id, url.Values{"decision": {"approve"}, "csrf": {m[1]}}, h.srv.URL)
	_, body = b.get("/review/" + id)
	// Decided at the harness's clock (2025-11-02 09:00 UTC); the grant
	// lasts protocol.timeouts.escalation (24 h).
	if g := between(t, body, `<p class="grant" id="mcp-grant">`, `</p>`); !strings.Contains(g, "through once, until 2025-11-03 09:00:00 UTC") {
		t.Errorf("after approval, grant line %q", g)
	}
	if strings.Contains(body, `id="approve"`) {
		t.Error("the buttons are still there after the decision")
	}
}

// TestReviewPageMCPArgumentsEmpty: a call without arguments says so, a
// tool without annotations lists every hint as not stated, none flagged,
// and once rejected the page says nothing passes.
func TestReviewPageMCPArgumentsEmpty(t *testing.T) {
	h := newHarness(t)
	id := escalateMCP(t, h, `{"annotations":{},"arguments":{},"arguments_sha256":"`+mcpSHA+`","description":"","method":"tools/call","server":"files","tool":"reset"}`)
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokReviewer}}, "")
	_, body := b.get("/review/" + id)
	for _, want := range []string{
		`<p class="muted" id="mcp-arguments">The call has no arguments.</p>`,
		`<td id="mcp-description"><span class="muted">none given by the server</span></td>`,
		`<code>destructiveHint</code>: <span class="muted">not stated</span> <span class="muted">(MCP&#39;s default: true (when not read-only))</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(body, `class="hint-warn"`) || strings.Contains(body, `id="mcp-title"`) {
		t.Error("a hint flagged, or a title shown, that the server did not state")
	}
	// Rejected, the page no longer speaks of a call that may pass.
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token")
	}
	b.post("/review/"+id, url.Values{"decision": {"reject"}, "csrf": {m[1]}}, h.srv.URL)
	_, body = b.get("/review/" + id)
	if g := between(t, body, `<p class="grant" id="mcp-grant">`, `</p>`); g != "Nothing was approved: this call does not run." {
		t.Errorf("after rejection, grant line %q", g)
	}
}

// TestReviewPageMCPFallsBack: content that is not exactly what the MCP
// door writes is not summarised (a summary that differs from what the
// decision binds would mislead): the page says the details could not be
// read and shows the raw content, escaped. An MCP-shaped content under
// another request type is not summarised either.
func TestReviewPageMCPFallsBack(t *testing.T) {
	variant := func(k, v string) string {
		// The content with member k's value replaced by v ("" drops it).
		members := map[string]string{
			"annotations": `{"destructiveHint":true}`, "arguments": `{"path":"<b>x</b>"}`, "arguments_sha256": `"` + mcpSHA + `"`,
			"description": `"Deletes a file."`, "method": `"tools/call"`, "server": `"files"`, "tool": `"delete_file"`,
		}
		if v == "" {
			delete(members, k)
		} else {
			members[k] = v
		}
		var b strings.Builder
		b.WriteString("{")
		for _, name := range []string{"annotations", "arguments", "arguments_sha256", "description", "method", "server", "tool"} {
			if v, ok := members[name]; ok {
				if b.Len() > 1 {
					b.WriteString(",")
				}
				b.WriteString(`"` + name + `":` + v)
			}
		}
		return b.String() + "}"
	}
	h := newHarness(t)
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokReviewer}}, "")

	// The helper's own output is read: the cases below fail for their
	// one change, not for the rest.
	id := escalateMCP(t, h, variant("tool", `"delete_file"`))
	if _, body := b.get("/review/" + id); !strings.Contains(body, `<code id="mcp-tool">delete_file</code>`) {
		t.Fatalf("the well-formed content is not summarised:\n%s", body)
	}

	for name, content := range map[string]string{
		"not JSON":               `call delete_file <b>x</b>`,
		"an array":               `[` + variant("tool", `"delete_file"`) + `]`,
		"trailing data":          variant("tool", `"delete_file"`) + ` {"tool":"other"}`,
		"unknown member":         strings.Replace(variant("tool", `"delete_file"`), `{`, `{"agent":"root",`, 1),
		"duplicate member":       strings.Replace(variant("tool", `"delete_file"`), `{`, `{"tool":"read_file",`, 1),
		"member in another case": strings.Replace(variant("tool", `"delete_file"`), `"tool":`, `"Tool":`, 1),
		"duplicate in arguments": variant("arguments", `{"path":"<b>x</b>","path":"y"}`),
		"another method":         variant("method", `"resources/read"`),
		"no server":              variant("server", `""`),
		"no tool":                variant("tool", ""),
		"no arguments hash":      variant("arguments_sha256", ""),
		"a short hash":           variant("arguments_sha256", `"abc"`),
		"a hash not hex":         variant("arguments_sha256", `"`+strings.Repeat("z", 64)+`"`),
		"arguments an array":     variant("arguments", `["<b>x</b>"]`),
		"arguments absent":       variant("arguments", ""),
		"annotations null":       variant("annotations", `null`),
		"server a number":        variant("server", `7`),
	} {
		t.Run(name, func(t *testing.T) {
			id := escalateMCP(t, h, content)
			_, body := b.get("/review/" + id)
			if strings.Contains(body, `id="mcp-server"`) || strings.Contains(body, `id="mcp-grant"`) {
				t.Errorf("summarised:\n%s", body)
			}
			if !strings.Contains(body, `<p class="error" id="mcp-unreadable">`) {
				t.Error("no note that the details could not be read")
			}
			if !strings.Contains(body, `<pre id="content">`) || strings.Contains(body, "<b>x</b>") {
				t.Errorf("the raw content is missing or unescaped:\n%s", body)
			}
		})
	}

	t.Run("another request type", func(t *testing.T) {
		rec, err := h.svc.Escalate(t.Context(), ExternalRequest{Type: TypeMessage, AgentID: "coder", Content: variant("tool", `"delete_file"`)})
		if err != nil {
			t.Fatal(err)
		}
		_, body := b.get("/review/" + rec.ID)
		if strings.Contains(body, `id="mcp-server"`) || strings.Contains(body, `id="mcp-unreadable"`) {
			t.Errorf("a %s escalation shown as a tool call:\n%s", TypeMessage, body)
		}
	})
}

// TestReviewPageMCPShowsMeta: a call's _meta, which its server receives
// and the approval binds, is shown to the person, escaped; a _meta that
// is not an object is not summarised.
func TestReviewPageMCPShowsMeta(t *testing.T) {
	h := newHarness(t)
	content := strings.Replace(mcpCall, `"method":"tools/call"`, `"meta":{"progressToken":"<p1>"},"method":"tools/call"`, 1)
	id := escalateMCP(t, h, content)
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokReviewer}}, "")
	_, body := b.get("/review/" + id)
	if meta := between(t, body, `<pre id="mcp-meta">`, `</pre>`); !strings.Contains(meta, `&#34;progressToken&#34;: &#34;&lt;p1&gt;&#34;`) {
		t.Errorf("_meta shown as %q", meta)
	}
	if _, err := parseMCPContent(strings.Replace(mcpCall, `"method":"tools/call"`, `"meta":[1],"method":"tools/call"`, 1)); err == nil {
		t.Error("a _meta that is not an object was summarised")
	}
}

// TestReviewPageMCPHeldCall: while the agent's call is held open, the
// page says who waits (the agent, and the person it acts for), until
// when and how long is left, the virtual server it called through, and
// that approving runs the call now for the waiting agent; once the wait
// is over it says the agent no longer waits, and the buttons say again
// that an approval lets the call through when the agent sends it again.
// A held time that is not RFC 3339 is not summarised.
func TestReviewPageMCPHeldCall(t *testing.T) {
	h := newHarness(t)
	until := h.clock.Now().Add(90 * time.Second).UTC().Format(time.RFC3339)
	content := strings.Replace(mcpCall, `"method":"tools/call"`,
		`"held":{"behalf":"alice@example.org","until":"`+until+`"},"method":"tools/call"`, 1)
	content = strings.Replace(content, `"tool":"delete_file"}`, `"tool":"delete_file","via":"all"}`, 1)
	id := escalateMCP(t, h, content)
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokReviewer}}, "")
	_, body := b.get("/review/" + id)
	held := between(t, body, `id="mcp-held">`, `</p>`)
	for _, want := range []string{"<b>coder</b>, acting for <b>alice@example.org</b>, is waiting", "2025-11-02 09:01:30", `<b id="mcp-held-left">1 min left</b>`} {
		if !strings.Contains(held, want) {
			t.Errorf("held line lacks %q: %s", want, held)
		}
	}
	for _, want := range []string{
		`<span class="muted" id="mcp-via">(called through <code>all</code>)</span>`,
		`Approve: the call runs now and its result goes to the waiting agent (APPROVED).`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if grant := between(t, body, `<p class="grant" id="mcp-grant">`, `</p>`); !strings.Contains(grant, "once, now, and its result goes to the waiting agent") {
		t.Errorf("grant line %q", grant)
	}

	h.clock.Advance(2 * time.Minute)
	_, body = b.get("/review/" + id)
	if held := between(t, body, `id="mcp-held">`, `</p>`); !strings.Contains(held, "it no longer waits") {
		t.Errorf("after the hold, held line %q", held)
	}
	if !strings.Contains(body, `Approve: this exact call may run once when the agent sends it again (APPROVED).`) {
		t.Error("after the hold, the buttons still promise a waiting agent")
	}
	if _, err := parseMCPContent(strings.Replace(content, until, "soon", 1)); err == nil {
		t.Error("a held time that is not RFC 3339 was summarised")
	}
}
