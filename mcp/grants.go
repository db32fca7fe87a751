package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"

	"github.com/sacpgw/gateway/internal/escalation"
)

// Grants are the approvals people gave to escalated tool calls: each lets
// one call through, once, until it expires. Take removes the grant it
// returns, so two identical calls racing for one approval cannot both
// pass.
type Grants interface {
	// Grant records that the call of key may pass once before ttl ends;
	// escalationID is the review that approved it.
	Grant(ctx context.Context, key, escalationID string, ttl time.Duration) error
	// Take consumes the grant of key: the escalation that approved it, and
	// ok false when there is none (or it expired).
	Take(ctx context.Context, key string) (escalationID string, ok bool, err error)
}

// MemoryGrants keeps grants in this process. The approval service tells
// the replica that heard the person's decision, so with more than one
// replica an approved call must come back through that one; RedisGrants
// (state.backend redis) removes the constraint.
type MemoryGrants struct {
	mu  sync.Mutex
	m   map[string]memGrant
	now func() time.Time
}

type memGrant struct {
	id      string
	expires time.Time
}

var _ Grants = (*MemoryGrants)(nil)

// NewMemoryGrants returns an empty store.
func NewMemoryGrants() *MemoryGrants { return &MemoryGrants{m: map[string]memGrant{}, now: time.Now} }

// Grant implements Grants; it also drops the grants that expired.
func (g *MemoryGrants) Grant(_ context.Context, key, escalationID string, ttl time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	for k, v := range g.m {
		if !now.Before(v.expires) {
			delete(g.m, k)
		}
	}
	g.m[key] = memGrant{id: escalationID, expires: now.Add(ttl)}
	return nil
}

// Take implements Grants.
func (g *MemoryGrants) Take(_ context.Context, key string) (string, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.m[key]
	delete(g.m, key)
	if !ok || !g.now().Before(v.expires) {
		return "", false, nil
	}
	return v.id, true, nil
}

// grantKey binds an approval to one call as its server receives it: the
// agent, the server, the tool and the SHA-256 of the RFC 8785 form of the
// arguments and of the _meta ("" for none), both redacted, which is what
// the gateway forwards. A different argument or _meta is another call,
// and another escalation.
func grantKey(agent, server, tool, argsSHA256, metaSHA256 string) string {
	h := sha256.New()
	for _, s := range []string{agent, server, tool, argsSHA256, metaSHA256} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// review is what a person judges (escalation.MCPCall, which the review
// page reads too). Its RFC 8785 form is the escalation's Content, whose
// SHA-256 binds the person's decision; the grant is made from the values
// shown, never from a hash beside them.
type review escalation.MCPCall

// heldReview is who waits for a held call's decision and until when.
type heldReview = escalation.MCPHeld

// content is r in RFC 8785 canonical form.
func (r review) content() (string, error) {
	if r.Annotations == nil {
		r.Annotations = jsontext.Value("{}")
	}
	if r.Arguments == nil {
		r.Arguments = jsontext.Value("{}")
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("mcp: review content: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return "", fmt.Errorf("mcp: review content: %w", err)
	}
	return string(out), nil
}

// readReview reads an escalation's Content back, strictly: only what
// content writes, the arguments (and _meta) in the canonical form the
// door forwards, and the hash the arguments have.
func readReview(content string) (review, error) {
	var r review
	if err := json.Unmarshal([]byte(content), &r, strict); err != nil {
		return review{}, fmt.Errorf("mcp: not an MCP tool call review: %w", err)
	}
	if r.Method != "tools/call" || r.Server == "" || r.Tool == "" || len(r.ArgumentsSHA256) != 64 ||
		r.Arguments.Kind() != '{' || (r.Meta != nil && r.Meta.Kind() != '{') {
		return review{}, errors.New("mcp: not an MCP tool call review")
	}
	if sha256Hex(r.Arguments) != r.ArgumentsSHA256 {
		return review{}, errors.New("mcp: the review's arguments are not those its hash names")
	}
	for _, v := range []jsontext.Value{r.Arguments, r.Meta} {
		if v == nil {
			continue
		}
		if c, err := canonicalForm(v); err != nil || !bytes.Equal(c, v) {
			return review{}, errors.New("mcp: the review's arguments or _meta are not in the form the gateway forwards")
		}
	}
	return r, nil
}

// metaSHA256 is the hash a grant binds for the review's _meta.
func (r review) metaSHA256() string {
	if r.Meta == nil {
		return ""
	}
	return sha256Hex(r.Meta)
}

// Resolve is the approval service's Resolver for escalation.TypeMCP: a
// person's approval grants the reviewed call, once, for the escalation
// timeout (protocol timeouts.escalation); a rejection grants nothing.
func (d *Door) Resolve(ctx context.Context, dec escalation.Decided) error {
	r, err := readReview(dec.Content)
	if err != nil {
		return err
	}
	if !dec.Approved {
		d.log.Info("mcp: tool call rejected by a person", "escalation_id", dec.ID, "agent", dec.AgentID, "server", r.Server, "tool", r.Tool)
		d.held.tell(dec)
		return nil
	}
	ttl := d.conf.Load().escalationTTL
	if err := d.grants.Grant(ctx, grantKey(dec.AgentID, r.Server, r.Tool, r.ArgumentsSHA256, r.metaSHA256()), dec.ID, ttl); err != nil {
		return fmt.Errorf("mcp: grant of escalation %s: %w", dec.ID, err)
	}
	d.log.Info("mcp: tool call approved by a person", "escalation_id", dec.ID, "agent", dec.AgentID, "server", r.Server, "tool", r.Tool, "valid", ttl.String())
	d.held.tell(dec)
	return nil
}
