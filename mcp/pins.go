package mcp

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"

	"github.com/sacpgw/gateway/internal/escalation"
)

// Pinned tool definitions. The gateway binds each tool to its definition
// (name, description, inputSchema, annotations) as first seen, or as
// gateway.yaml's pins name it: a server that later serves another
// definition of the tool (a "rug pull": a description that now carries
// instructions to the model, a schema that now asks for more) has the tool
// withheld from tools/list and its calls refused until a person approves
// the new definition on the review page, which shows the approved and the
// served definitions side by side. A description a blocking detector
// fires on is withheld the same way (and the policy reads every
// description, to refuse instruction-like text).

// definition is what a pin binds, in RFC 8785 form, and its SHA-256.
func definition(ti toolInfo) (jsontext.Value, string, error) {
	orNull := func(v jsontext.Value) jsontext.Value {
		if v == nil {
			return jsontext.Value("null")
		}
		return v
	}
	raw, err := json.Marshal(map[string]any{"name": ti.Name, "description": ti.Description,
		"inputSchema": orNull(ti.InputSchema), "annotations": orNull(ti.Annotations)})
	if err != nil {
		return nil, "", err
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		return nil, "", fmt.Errorf("definition: %w", err)
	}
	return c, sha256Hex(c), nil
}

// pins are the approved definitions, by server and tool, and the reviews
// opened for served definitions that differ.
type pins struct {
	mu sync.Mutex
	ok map[string]pinned
	// reviews are the changed definitions a review was opened for, by
	// server, tool and served hash: one review per change.
	reviews map[string]bool
}

type pinned struct {
	sha string
	def jsontext.Value // nil when the pin came from the configuration
}

func pinKey(server, tool string) string { return server + "\x00" + tool }

// check reports whether ti is its tool's approved definition, pinning it
// when the tool has no pin yet; else the approved one.
func (p *pins) check(srv *server, ti toolInfo) (bool, pinned) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ok == nil {
		p.ok, p.reviews = map[string]pinned{}, map[string]bool{}
	}
	key := pinKey(srv.name, ti.Name)
	pin, ok := p.ok[key]
	if !ok {
		if want, ok := srv.pins[ti.Name]; ok && want != ti.sha {
			return false, pinned{sha: want}
		}
		p.ok[key] = pinned{sha: ti.sha, def: ti.def}
		return true, pinned{}
	}
	return pin.sha == ti.sha, pin
}

// opening reports whether a review of ti's served definition is still to
// be opened, and marks it opened.
func (p *pins) opening(server string, ti toolInfo) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := pinKey(server, ti.Name) + "\x00" + ti.sha
	if p.reviews[k] {
		return false
	}
	p.reviews[k] = true
	return true
}

// failed forgets a review that could not be opened: the next sight opens
// it again.
func (p *pins) failed(server string, ti toolInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.reviews, pinKey(server, ti.Name)+"\x00"+ti.sha)
}

func (p *pins) approve(server, tool, sha string, def jsontext.Value) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ok == nil {
		p.ok, p.reviews = map[string]pinned{}, map[string]bool{}
	}
	p.ok[pinKey(server, tool)] = pinned{sha: sha, def: def}
}

// definitionReview is what a person judges of a changed definition.
type definitionReview struct {
	Method       string         `json:"method"`
	Server       string         `json:"server"`
	Tool         string         `json:"tool"`
	ApprovedSHA  string         `json:"approved_sha256"`
	Approved     jsontext.Value `json:"approved"`
	ServedSHA    string         `json:"served_sha256"`
	Served       jsontext.Value `json:"served"`
	ServedReason string         `json:"reason,omitzero"`
}

const methodDefinition = "tools/definition"

// servable reports whether the agent may see and call ti as served: its
// definition is the approved one and no blocking detector fires on its
// description. A definition that changed opens a review (once per
// change); why says what withholds it.
func (t *turn) servable(ctx context.Context, ti toolInfo) (ok bool, why string) {
	if t.c.red != nil {
		if _, res := t.c.red.String(ti.Description); res.Blocked != "" {
			return false, "its description holds data a detector blocks (" + res.Blocked + ")"
		}
	}
	same, pin := t.d.pins.check(t.srv, ti)
	if same {
		return true, ""
	}
	if t.d.opener != nil && t.d.pins.opening(t.srv.name, ti) {
		if err := t.openDefinitionReview(ctx, ti, pin); err != nil {
			t.d.pins.failed(t.srv.name, ti)
			t.d.log.Error("mcp: review of a changed tool definition not opened", "server", t.srv.name, "tool", ti.Name, "error", err.Error())
		}
	}
	return false, "its definition changed since a person approved it; it is withheld until a person reviews the change"
}

func (t *turn) openDefinitionReview(ctx context.Context, ti toolInfo, pin pinned) error {
	approved := pin.def
	if approved == nil {
		approved = jsontext.Value("null")
	}
	raw, err := json.Marshal(definitionReview{Method: methodDefinition, Server: t.srv.name, Tool: ti.Name,
		ApprovedSHA: pin.sha, Approved: approved, ServedSHA: ti.sha, Served: ti.def})
	if err != nil {
		return err
	}
	content, err := jcs.Transform(raw)
	if err != nil {
		return err
	}
	opened, err := t.d.opener.Open(context.WithoutCancel(ctx), escalation.Request{Type: escalation.TypeMCPTool, AgentID: t.agent.ID,
		SessionID: t.ex.SessionID, Action: "serve the changed MCP tool " + t.srv.name + "/" + ti.Name, Content: string(content),
		Reason: "the server changed the tool's definition since it was approved"})
	if err != nil {
		return err
	}
	t.d.log.Warn("mcp: tool definition changed: withheld until a person approves", "server", t.srv.name, "tool", ti.Name,
		"escalation_id", opened.ID, "served_sha256", ti.sha, "approved_sha256", pin.sha)
	return nil
}

// ResolveDefinition is the approval service's Resolver for
// escalation.TypeMCPTool: approved, the served definition becomes the
// tool's pin; rejected, the tool stays withheld.
func (d *Door) ResolveDefinition(_ context.Context, dec escalation.Decided) error {
	var r definitionReview
	if err := json.Unmarshal([]byte(dec.Content), &r, strict); err != nil || r.Method != methodDefinition || r.Server == "" || r.Tool == "" {
		return errors.New("mcp: not a tool definition review")
	}
	if def, sha, err := canonicalDefinition(r.Served); err != nil || sha != r.ServedSHA {
		return errors.New("mcp: the review's definition is not the one its hash names")
	} else if dec.Approved {
		d.pins.approve(r.Server, r.Tool, sha, def)
		d.log.Info("mcp: changed tool definition approved by a person", "escalation_id", dec.ID, "server", r.Server, "tool", r.Tool, "sha256", sha)
		return nil
	}
	d.log.Info("mcp: changed tool definition rejected: the tool stays withheld", "escalation_id", dec.ID, "server", r.Server, "tool", r.Tool)
	return nil
}

// canonicalDefinition is v in RFC 8785 form and its SHA-256.
func canonicalDefinition(v jsontext.Value) (jsontext.Value, string, error) {
	c, err := jcs.Transform(v)
	if err != nil {
		return nil, "", err
	}
	return c, sha256Hex(c), nil
}
