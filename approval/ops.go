package approval

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/pricing"
	"github.com/sacpgw/gateway/internal/roster"
)

// The operator page, GET /review/ops: what an operator checks on the
// gateway's first day and every day after. Agents' use of their limits,
// the escalation queue, the refusals and policy disagreements the audit
// trail recorded lately, the policy revision, and whether the end of the
// audit chain is sound. Reviewers and the admin sign in as for the review
// pages; the page changes nothing, and only the admin sees where refused
// requests came from (source addresses are personal data a reviewer does
// not need).
//
// The handler only authenticates, asks an OpsSource and renders: the data
// lives in parts (limits, policies, the audit trail) that the approval
// service does not hold, so the wiring (package app) implements the
// source.

// OpsSource gathers what the operator page shows besides the escalation
// queue, which the service has itself. Each method returns what it could
// read, with an error text in place of what it could not, so one part
// failing (Redis down, the audit directory unreadable) leaves the rest of
// the page standing. The page bounds the context (opsDeadline).
type OpsSource interface {
	// Usage is each agent's use of its limits now, in the order of agents
	// (the configured agents, by id).
	Usage(ctx context.Context, agents []*roster.Agent) []AgentUsage
	// Trail is the recent end of this replica's audit chain: its state,
	// and the refusals and shadow-policy disagreements recorded in it.
	Trail(ctx context.Context) TrailStatus
	// Policy is the live policies' revision and the engine's counters.
	Policy(ctx context.Context) PolicyStatus
}

// AgentUsage is one agent's use of its limits.
type AgentUsage struct {
	Agent  string
	Limits []LimitUse
	// SpentMicroUSD is what this replica counted the agent spending since
	// it started, in micro-dollars: exact, as a call often costs a
	// fraction of a cent. UnknownCost counts its calls whose cost is
	// unknown (the audit entries' cost.priced false: no price, no usage,
	// or a usage report that could not be believed).
	SpentMicroUSD int64
	UnknownCost   uint64
}

// LimitUse is the use of one limit: Used of Limit per Period, in the
// dimension's unit (requests, tokens, or dollars for "USD").
type LimitUse struct {
	Dimension   string
	Used, Limit float64
	Period      time.Duration
	// Reset is how long until the limit is whole again.
	Reset time.Duration
	// Error says why the use could not be read (the limit itself still
	// applies).
	Error string
}

// TrailStatus is the recent end of the audit chain, as read from disk.
type TrailStatus struct {
	Chain string
	// Read entries were read back to Since; Partial when older ones
	// exist that were not read (the read is bounded).
	Read    int
	Since   time.Time
	Partial bool
	LastSeq int64
	// LastHash is the last entry's hash; LastAt its time.
	LastHash string
	LastAt   time.Time
	// Checkpoint is the last checkpoint; nil when there is none yet.
	Checkpoint *CheckpointStatus
	// Torn counts files into which crash recoveries moved torn bytes.
	Torn int
	// Problem is the first inconsistency found in the entries read.
	Problem string
	// Error says why the trail could not be read at all.
	Error string
	// Refusals and Disagreements are what the entries read recorded,
	// newest first.
	Refusals      []Refusal
	Disagreements []Disagreement
}

// CheckpointStatus is the chain's last checkpoint.
type CheckpointStatus struct {
	Seq    int64
	At     time.Time
	Signed bool
	// Checked: its hash was compared with the entry it names, which was
	// among the entries read, and matched.
	Checked bool
}

// Refusal is a request the gateway refused, as its audit entry records it.
type Refusal struct {
	At        time.Time
	Kind      string // the entry's kind: auth.failure, ratelimit.reject…
	Agent     string
	Route     string
	Status    int // the HTTP status, when the entry has one
	Reason    string
	RequestID string
	// Source is the remote address of a failed authentication; shown to
	// the admin only.
	Source string
	// Count is how many refusals a summarized entry stands for (repeated
	// failed authentications from one source); 1 otherwise.
	Count int
}

// Disagreement is a decision on which the shadow policies disagreed with
// the live ones.
type Disagreement struct {
	At    time.Time
	Point string
	// Live and Shadow are the two verdicts, as the policy.shadow entry
	// summarizes them ("deny [reason]").
	Live, Shadow string
}

// PolicyStatus is the policy engine's state.
type PolicyStatus struct {
	Revision, ShadowRevision string
	// ReloadProblem is why the last reload was refused ("" when it
	// loaded): the last good policies still decide.
	ReloadProblem string
	// Bundle is the signed policy bundle, when the policies come from one.
	Bundle                                                *BundleStatus
	Decisions, FailClosed                                 uint64
	ShadowEvaluations, ShadowDisagreements, ShadowDropped uint64
}

// BundleStatus is the policy bundle on the operator page: where it comes
// from, the .manifest revision serving, and why the newest one was refused
// ("" when it loaded).
type BundleStatus struct {
	Source, Revision, Error string
	Checked                 time.Time
}

// opsDeadline bounds what the page waits for its sources (a Redis that
// does not answer, a slow disk): past it, each part reports its error.
const opsDeadline = 3 * time.Second

// maxOpsRefusals bounds the refusals listed on the page (the chart counts
// them all).
const maxOpsRefusals = 50

// reviewOps serves GET /review/ops.
func (s *Service) reviewOps(w http.ResponseWriter, r *http.Request, src OpsSource) error {
	sess, err := s.pageSession(w, r, "/review/ops")
	if sess == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), opsDeadline)
	defer cancel()
	in := opsInput{
		Usage: src.Usage(ctx, agentsOf(s.cur().cfg)), Trail: src.Trail(ctx), Policy: src.Policy(ctx),
	}
	if in.Queue, err = s.pending(ctx, sess.who); err != nil {
		s.log.Warn("operator page: escalations unreadable", "error", err.Error())
		in.QueueError = "The escalation queue could not be read: " + err.Error()
	}
	return render(w, http.StatusOK, "ops", opsView(navOf(sess), in, s.now()))
}

// agentsOf lists the configured agents by id.
func agentsOf(cfg *config.Config) []*roster.Agent {
	out := make([]*roster.Agent, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *roster.Agent) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// opsInput is what the page gathered.
type opsInput struct {
	Usage      []AgentUsage
	Trail      TrailStatus
	Policy     PolicyStatus
	Queue      []EscalationItem
	QueueError string
}

// opsPage is the operator page as the template draws it.
type opsPage struct {
	Nav navBar
	// Full: the admin's view, with the sources of refusals.
	Full       bool
	Now        time.Time
	Agents     []agentRow
	Queue      []queueRow
	QueueError string
	// Oldest is how long the oldest escalation has waited.
	Oldest       string
	Trail        TrailStatus
	Refusals     []Refusal
	RefusalCount int
	RefusalKinds []bar
	Policy       PolicyStatus
}

type agentRow struct {
	Agent string
	Bars  []bar
	// Spent is the priced spend, Unknown the calls of unknown cost, in
	// words; both "" when nothing was counted.
	Spent, Unknown string
}

// bar is one horizontal bar of a chart, drawn as inline SVG (markup, so
// the page's Content-Security-Policy needs no image source): Fill of Width
// pixels in Colour, with Text saying the same in words (colour is never
// the only sign).
type bar struct {
	Label, Text string
	Fill, Width int
	Colour      string
	Error       string
}

// barWidth is the length of a full bar, in pixels.
const barWidth = 240

// Bar colours: calm, nearly used up, used up (or in debt).
const (
	colourOK   = "#1a7f37"
	colourNear = "#b7791f"
	colourFull = "#b42318"
)

func opsView(nav navBar, in opsInput, now time.Time) opsPage {
	p := opsPage{Nav: nav, Full: nav.Who.Admin, Now: now, QueueError: in.QueueError, Trail: in.Trail, Policy: in.Policy,
		Queue: queueRows(in.Queue, now)}
	if len(in.Queue) > 0 && in.Queue[0].Escalation != nil {
		p.Oldest = span(now.Sub(in.Queue[0].Escalation.At))
	}
	for _, u := range in.Usage {
		row := agentRow{Agent: u.Agent}
		if u.SpentMicroUSD > 0 || u.UnknownCost > 0 {
			row.Spent = dollars(u.SpentMicroUSD)
		}
		switch n := u.UnknownCost; {
		case n == 1:
			row.Unknown = "1 call of unknown cost"
		case n > 1:
			row.Unknown = strconv.FormatUint(n, 10) + " calls of unknown cost"
		}
		for _, l := range u.Limits {
			row.Bars = append(row.Bars, usageBar(l))
		}
		p.Agents = append(p.Agents, row)
	}
	// The page's own copy of the refusals: a reviewer's view never holds
	// the sources, so no template change can show them.
	p.Trail.Refusals = nil
	counts := map[string]int{}
	for _, r := range in.Trail.Refusals {
		counts[r.Kind] += max(r.Count, 1)
		p.RefusalCount += max(r.Count, 1)
		if len(p.Refusals) < maxOpsRefusals {
			if !p.Full {
				r.Source = ""
			}
			p.Refusals = append(p.Refusals, r)
		}
	}
	p.RefusalKinds = countBars(counts)
	return p
}

// usageBar draws a limit's use: green, amber from 70%, red from 90%.
func usageBar(l LimitUse) bar {
	b := bar{Label: l.Dimension, Width: barWidth, Error: l.Error}
	if l.Error != "" {
		return b
	}
	frac := 0.0
	if l.Limit > 0 {
		frac = min(max(l.Used/l.Limit, 0), 1)
	}
	b.Fill = int(math.Round(frac * barWidth))
	switch {
	case frac >= 0.9:
		b.Colour = colourFull
	case frac >= 0.7:
		b.Colour = colourNear
	default:
		b.Colour = colourOK
	}
	b.Text = fmt.Sprintf("%s of %s%s per %s (%d%%)", amount(l.Dimension, l.Used), amount(l.Dimension, l.Limit), unit(l.Dimension),
		confkit.PeriodName(l.Period), int(math.Round(frac*100)))
	if l.Used > 0 && l.Reset > 0 {
		b.Text += "; whole again in " + span(max(l.Reset, time.Minute))
	}
	return b
}

// countBars draws counts by name, most first, scaled to the largest.
func countBars(counts map[string]int) []bar {
	top := 0
	for _, n := range counts {
		top = max(top, n)
	}
	out := make([]bar, 0, len(counts))
	for name, n := range counts {
		out = append(out, bar{Label: name, Text: strconv.Itoa(n), Width: barWidth, Fill: int(math.Round(float64(n) / float64(top) * barWidth)), Colour: colourFull})
	}
	slices.SortFunc(out, func(a, b bar) int {
		if c := cmp.Compare(b.Fill, a.Fill); c != 0 {
			return c
		}
		return cmp.Compare(a.Label, b.Label)
	})
	return out
}

// amount writes a quantity of a dimension: dollars (see dollars), counts
// with thousands separators.
func amount(dim string, v float64) string {
	if dim == "USD" {
		return dollars(int64(math.Round(v * 1e6)))
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// dollars writes micro-dollars as money: cents at least ($18.40), and
// every digit a smaller amount has ($0.0004), so that a sub-cent spend
// never reads as $0.00.
func dollars(microUSD int64) string {
	whole, frac, _ := strings.Cut(pricing.FormatUSD(microUSD), ".")
	for len(frac) < 2 {
		frac += "0"
	}
	return "$" + whole + "." + frac
}

// unit follows an amount: " requests", " tokens"; dollars carry theirs.
func unit(dim string) string {
	if dim == "USD" {
		return ""
	}
	return " " + dim
}
