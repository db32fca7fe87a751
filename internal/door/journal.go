package door

import (
	"context"
	"net/http"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/scope"
)

// Journal is where one exchange's audit entries are written, through one
// recorder: a refusal (auth.failure, ratelimit.reject, or the entry of a
// request refused before its call), or the entry of the request before
// its call (started in the background so that its fsync overlaps the
// provider's time; no answer leaves before it is durable in closed mode)
// and exactly one entry of the response, however the exchange ends. A
// door's chain opens it (Open) and every stage after writes through it;
// the identify stage and the rate gate find it on the request (JournalOf).
type Journal struct {
	rec         *Recorder
	ex          *scope.Exchange
	waitRequest func() error
	// wrote is set once an entry of the exchange was written (or tried).
	wrote     bool
	responded bool
}

type journalKey struct{}

// Open opens the journal of r's exchange for every later handler: it
// returns the request carrying it, and end, to call when the exchange is
// over (the trail holds a group commit open only for exchanges in
// progress).
func Open(r *http.Request, rec *Recorder) (j *Journal, next *http.Request, end func()) {
	j = &Journal{rec: rec, ex: scope.Get(r.Context())}
	return j, r.WithContext(context.WithValue(r.Context(), journalKey{}, j)), rec.Begin()
}

// JournalOf returns the journal a chain opened for r, or a new one for a
// door that runs the identify stage or the rate gate without a chain of
// its own (the approval, relay, registry, workflow and MCP routes).
func JournalOf(r *http.Request, rec *Recorder) *Journal {
	if j, ok := r.Context().Value(journalKey{}).(*Journal); ok {
		return j
	}
	return &Journal{rec: rec, ex: scope.Get(r.Context())}
}

// Wrote reports whether an entry of the exchange was written (or tried).
func (j *Journal) Wrote() bool { return j.wrote }

// Refused writes the entry of a refusal before any call (auth.failure,
// ratelimit.reject); its error is the recorder's (closed mode: 503).
func (j *Journal) Refused(ctx context.Context, rec audit.Record) error {
	j.wrote = true
	return j.rec.Write(ctx, Stamp(j.ex, rec))
}

// Begin starts the entry of the request (in the background; Requested
// waits for it).
func (j *Journal) Begin(ctx context.Context, rec audit.Record) {
	j.wrote = true
	j.waitRequest = j.rec.Start(ctx, Stamp(j.ex, rec))
}

// Requested returns once the entry Begin started is durable (or failed).
func (j *Journal) Requested() error {
	if j.waitRequest == nil {
		return nil
	}
	return j.waitRequest()
}

// Respond writes the entry of the response once, built by rec; later
// calls do nothing. The write outlives the client's context.
func (j *Journal) Respond(ctx context.Context, rec func() audit.Record) error {
	if j.responded {
		return nil
	}
	j.responded = true
	return j.rec.Write(context.WithoutCancel(ctx), Stamp(j.ex, rec()))
}

// Stamp puts the exchange's identity on rec: agent, session, request and
// correlation ids, and the workflow run a step belongs to.
func Stamp(ex *scope.Exchange, rec audit.Record) audit.Record {
	rec.SessionID, rec.RequestID = ex.SessionID, ex.RequestID
	if ex.Agent != nil {
		rec.AgentID = ex.Agent.ID
	}
	if ex.CorrelationID != "" {
		rec = withSummary(rec, "correlation_id", ex.CorrelationID)
	}
	if ex.RunID != "" {
		rec = withSummary(withSummary(rec, "run_id", ex.RunID), "node", ex.Node)
	}
	return rec
}

// withSummary adds a string member to rec's summary.
func withSummary(rec audit.Record, name, value string) audit.Record {
	if rec.Object == nil {
		rec.Object = &audit.Object{}
	}
	rec.Object.Str(name, value)
	return rec
}
