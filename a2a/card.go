package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/strictjson"
)

// CardPath is where an A2A agent publishes its card, below its base URL.
const CardPath = "/.well-known/agent-card.json"

// Bounds of a card: larger, or with more skills, is refused, never cut.
const (
	maxCardBytes = 1 << 20
	maxSkills    = 256
	// cardTTL is how long a card read serves before the next call reads
	// it again (a change is then audited and listed).
	cardTTL = 5 * time.Minute
)

// errCardUnavailable is a card that could not be read or was refused;
// the cause is logged, not shown (it may name the agent's address).
var errCardUnavailable = errors.New("the agent's card could not be read")

// cardState is one agent's card as last read and checked.
type cardState struct {
	url string // the configured a2a.url it was read from
	// card is the card as the agent published it; endpoint is its JSON-RPC
	// interface, where the gateway sends the agent's calls.
	card     *sdk.AgentCard
	endpoint string
	digest   string // sha256 of the card's bytes
	read     time.Time
}

// cards holds the cards read, by agent.
type cards struct {
	d       *Door
	mu      sync.Mutex
	byAgent map[string]*cardState
	// reading serializes reads, so that a change is seen (and audited)
	// once.
	reading sync.Mutex
}

// keep drops the cards of agents that are gone or whose URL changed.
func (cs *cards) keep(agents map[string]*roster.Agent) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for id, st := range cs.byAgent {
		if a := agents[id]; a == nil || a.A2A == nil || a.A2A.URL != st.url {
			delete(cs.byAgent, id)
			if cs.d.skills != nil {
				cs.d.skills.SetSkills(id, nil)
			}
		}
	}
}

// get returns a's card, read again when older than cardTTL. A card that
// cannot be read again keeps serving as it was.
func (cs *cards) get(ctx context.Context, a *roster.Agent) (*cardState, error) {
	cs.mu.Lock()
	st := cs.byAgent[a.ID]
	cs.mu.Unlock()
	if st != nil && st.url == a.A2A.URL && cs.d.now().Sub(st.read) < cardTTL {
		return st, nil
	}
	fresh, err := cs.fetch(ctx, a)
	if err != nil {
		if st != nil && st.url == a.A2A.URL {
			cs.d.log.Warn("a2a: agent card not read again; the last one serves", "agent", a.ID, "err", err)
			return st, nil
		}
		cs.d.log.Warn("a2a: agent card not read", "agent", a.ID, "err", err)
		return nil, errCardUnavailable
	}
	return fresh, nil
}

// fetch reads a's card through the outbound guard, checks it, and keeps
// it; a card read for the first time or changed is audited and its
// skills listed.
func (cs *cards) fetch(ctx context.Context, a *roster.Agent) (*cardState, error) {
	cs.reading.Lock()
	defer cs.reading.Unlock()
	raw, err := cs.download(ctx, a.A2A.URL)
	if err != nil {
		return nil, err
	}
	card, endpoint, err := parseCard(raw, a.A2A.URL)
	if err != nil {
		return nil, err
	}
	st := &cardState{url: a.A2A.URL, card: card, endpoint: endpoint, digest: sha256Hex(raw), read: cs.d.now()}
	cs.mu.Lock()
	prev := cs.byAgent[a.ID]
	cs.mu.Unlock()
	// The change is audited and listed before the card serves: a caller
	// that got it finds its skills in the registry.
	if prev == nil || prev.digest != st.digest {
		cs.changed(ctx, a.ID, prev, st)
	}
	cs.mu.Lock()
	cs.byAgent[a.ID] = st
	cs.mu.Unlock()
	return st, nil
}

// download GETs the card at base, bounded in time and size.
func (cs *cards) download(ctx context.Context, base string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+CardPath, nil)
	if err != nil {
		return nil, fmt.Errorf("card request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "sacp-gateway")
	resp, err := cs.d.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("card: %w", unwrapURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("card: answered HTTP %d", resp.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxCardBytes+1))
	if err != nil {
		return nil, fmt.Errorf("card: %w", unwrapURL(err))
	}
	if len(raw) > maxCardBytes {
		return nil, fmt.Errorf("card: larger than %d bytes", maxCardBytes)
	}
	return raw, nil
}

// unwrapURL drops the URL a url.Error carries (its query may hold a
// key), keeping the cause.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// parseCard reads a card strictly and checks it: a name, unique skill
// ids, and a JSON-RPC interface of protocol 1.x on the configured
// agent's own origin (a card may not send the gateway, and the calls it
// relays, elsewhere). It returns the card and that interface's URL.
func parseCard(raw []byte, base string) (*sdk.AgentCard, string, error) {
	if err := strictjson.Check(raw, nil); err != nil {
		return nil, "", fmt.Errorf("card: %w", err)
	}
	var card sdk.AgentCard
	if err := json.Unmarshal(raw, &card); err != nil {
		return nil, "", fmt.Errorf("card: %w", err)
	}
	if strings.TrimSpace(card.Name) == "" {
		return nil, "", errors.New("card: no name")
	}
	if len(card.Skills) > maxSkills {
		return nil, "", fmt.Errorf("card: %d skills, at most %d", len(card.Skills), maxSkills)
	}
	seen := map[string]bool{}
	for _, s := range card.Skills {
		if s.ID == "" || seen[s.ID] {
			return nil, "", fmt.Errorf("card: skill id %q is empty or repeated", s.ID)
		}
		seen[s.ID] = true
	}
	b, err := url.Parse(base)
	if err != nil {
		return nil, "", fmt.Errorf("card: base URL: %w", err)
	}
	for _, in := range card.SupportedInterfaces {
		if in == nil || in.ProtocolBinding != sdk.TransportProtocolJSONRPC || !servedVersion(string(in.ProtocolVersion)) {
			continue
		}
		u, err := url.Parse(in.URL)
		if err != nil || u.Scheme != b.Scheme || u.Host != b.Host || u.User != nil {
			return nil, "", errors.New("card: the JSON-RPC interface is not on the agent's configured origin")
		}
		return &card, in.URL, nil
	}
	return nil, "", fmt.Errorf("card: no JSON-RPC interface of A2A %s", Version)
}

// rewrite is the card as callers see it: the gateway's interface and
// bearer scheme only, no push notifications, no extended card, no
// signatures (they signed what the agent published, not this).
func rewrite(card *sdk.AgentCard, endpoint string) *sdk.AgentCard {
	out := *card
	out.SupportedInterfaces = []*sdk.AgentInterface{{URL: endpoint, ProtocolBinding: sdk.TransportProtocolJSONRPC, ProtocolVersion: Version}}
	out.SecuritySchemes = sdk.NamedSecuritySchemes{gatewayScheme: sdk.HTTPAuthSecurityScheme{Scheme: "Bearer",
		Description: "The agent's token for the gateway."}}
	out.SecurityRequirements = sdk.SecurityRequirementsOptions{{gatewayScheme: sdk.SecuritySchemeScopes{}}}
	out.Capabilities.PushNotifications = false
	out.Capabilities.ExtendedAgentCard = false
	out.Signatures = nil
	out.Skills = slices.Clone(card.Skills)
	for i := range out.Skills {
		out.Skills[i].SecurityRequirements = nil
	}
	return &out
}

// gatewayScheme names the gateway's security scheme in a rewritten card.
const gatewayScheme = "gateway"

// serveCard serves GET /a2a/{agent}/.well-known/agent-card.json.
func (d *Door) serveCard(w http.ResponseWriter, r *http.Request) {
	c := d.conf.Load()
	a := c.target(r)
	if a == nil {
		httpx.Fail(w, r, notFound(r.PathValue("agent")))
		return
	}
	st, err := d.cards.get(r.Context(), a)
	if err != nil {
		httpx.Fail(w, r, unavailable())
		return
	}
	httpx.WriteJSON(w, r, http.StatusOK, rewrite(st.card, c.endpointURL(r, a.ID)))
}

// endpointURL is /a2a/{id} at the gateway's external URL.
func (c *conf) endpointURL(r *http.Request, id string) string { return c.gatewayURL(r) + "/a2a/" + id }

// gatewayURL is the gateway's external URL: approval.base_url, else the
// host the caller asked.
func (c *conf) gatewayURL(r *http.Request) string {
	if base := strings.TrimSuffix(c.baseURL, "/"); base != "" {
		return base
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// changed audits a card read for the first time or changed (its digest
// and the skills added and removed) and lists its skills.
func (cs *cards) changed(ctx context.Context, agent string, prev, st *cardState) {
	var before []string
	if prev != nil {
		before = skillIDs(prev.card)
	}
	after := skillIDs(st.card)
	o := &audit.Object{}
	o.Str("agent", agent)
	o.Str("dialect", "a2a")
	o.Str("card_sha256", st.digest)
	if prev != nil {
		o.Str("previous_sha256", prev.digest)
	}
	o.Any("skills", after)
	o.Any("skills_added", minus(after, before))
	o.Any("skills_removed", minus(before, after))
	if err := cs.d.audit.Write(ctx, audit.Record{Kind: KindCard, AgentID: agent, PayloadSHA256: st.digest, Object: o}); err != nil {
		cs.d.log.Error("a2a: card change not audited", "agent", agent, "err", err)
	}
	if cs.d.skills != nil {
		skills := make([]Skill, 0, len(st.card.Skills))
		for _, s := range st.card.Skills {
			skills = append(skills, Skill{ID: s.ID, Name: s.Name, Description: s.Description, Tags: slices.Clone(s.Tags)})
		}
		cs.d.skills.SetSkills(agent, skills)
	}
}

func skillIDs(card *sdk.AgentCard) []string {
	ids := make([]string, 0, len(card.Skills))
	for _, s := range card.Skills {
		ids = append(ids, s.ID)
	}
	return ids
}

// minus is the elements of a not in b.
func minus(a, b []string) []string {
	out := []string{}
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}
