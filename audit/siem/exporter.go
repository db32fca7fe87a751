// Package siem streams the audit trail to a SIEM: every entry of this
// process's chain is sent, as it is committed, as an OpenTelemetry log
// record over OTLP (HTTP/protobuf or gRPC) to a collector, which Splunk,
// Elastic, Sentinel, Datadog and the like read from.
//
// The local chain stays the source of truth and the only write-ahead log:
// the exporter reads committed entries from its files (audit.Follower),
// never from the request path, so a slow or absent collector never slows
// or fails an answer. Delivery is at least once: a cursor file in the
// audit directory names the last entry the collector acknowledged, it is
// replaced (atomically) only after an acknowledgement, and a restart
// resends from there; a batch cut short by a crash may arrive twice.
package siem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/egress"
)

// maxBatchBytes bounds the entries' bytes in one export (a gRPC collector
// refuses messages over 4 MiB by default); one entry goes alone whatever
// its size.
const maxBatchBytes = 3 << 20

// maxBackoff caps the wait between failed exports.
const maxBackoff = 30 * time.Second

// Source is the chain the exporter follows.
type Source struct {
	Dir, Chain string
	// Durable is the seq of the chain's last durable entry (audit.Log.Durable).
	Durable func() int64
}

// Options are the rest of what New takes.
type Options struct {
	// Egress is the policy every connection to the collector is dialed through.
	Egress egress.Policy
	Log    *slog.Logger
	// Service and Version name the records' resource (service.name,
	// service.version); the chain is its service.instance.id.
	Service, Version string
}

// Stats are the exporter's counters, for metrics.
type Stats struct {
	Exported uint64 // entries the collector acknowledged
	Errors   uint64 // export calls that failed (each is retried)
	Rejected uint64 // entries the collector acknowledged but refused (partial success)
	// Acked is the seq of the last acknowledged entry; Lag how many
	// committed entries follow it.
	Acked, Lag int64
	// LastSuccess is when the collector last acknowledged an export.
	LastSuccess time.Time
}

// Exporter sends a chain's entries to a collector.
type Exporter struct {
	cfg    Config
	src    Source
	send   sender
	res    *resourcepb.Resource
	log    *slog.Logger
	cursor string // the cursor file's path

	exported, errors, rejected atomic.Uint64
	acked, lastSuccess         atomic.Int64
}

// New builds an exporter of src to the collector of cfg (checked).
func New(cfg Config, src Source, o Options) (*Exporter, error) {
	if probs := cfg.Check(); len(probs) > 0 {
		return nil, errors.New(probs[0].Msg)
	}
	s, err := newSender(cfg, o.Egress)
	if err != nil {
		return nil, err
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	return &Exporter{
		cfg: cfg, src: src, send: s, res: resource(o.Service, o.Version, src.Chain),
		log:    log.With("component", "audit.otlp", "chain", src.Chain),
		cursor: filepath.Join(src.Dir, CursorName(src.Chain)),
	}, nil
}

// CursorName is the cursor file's name in the audit directory. It is
// none of the trail's own names (segments, checkpoints, torn files,
// locks), which verification and export ignore.
func CursorName(chain string) string { return chain + ".otlp-cursor.json" }

// cursor is the last entry the collector acknowledged.
type cursor struct {
	Chain string `json:"chain"`
	Seq   int64  `json:"seq"`
	Hash  string `json:"hash"`
}

// Stats returns the counters so far.
func (e *Exporter) Stats() Stats {
	acked := e.acked.Load()
	s := Stats{Exported: e.exported.Load(), Errors: e.errors.Load(), Rejected: e.rejected.Load(), Acked: acked,
		Lag: max(0, e.src.Durable()-acked)}
	if t := e.lastSuccess.Load(); t != 0 {
		s.LastSuccess = time.Unix(0, t)
	}
	return s
}

// Run sends entries until ctx ends, then makes one last attempt (within
// the export timeout) to send what was committed by then, and closes the
// connection.
func (e *Exporter) Run(ctx context.Context) {
	defer func() { _ = e.send.close() }()
	cur := e.loadCursor()
	if end := e.src.Durable(); cur.Seq > end {
		// At the start the durable seq is the chain's end: a cursor past
		// it belongs to another trail, and waiting for it would send nothing.
		e.log.Error("the OTLP cursor is past the end of the audit chain; sending the chain from its start", "cursor_seq", cur.Seq, "last_seq", end)
		cur = cursor{Chain: e.src.Chain}
		e.acked.Store(0)
	}
	f := audit.NewFollower(e.src.Dir, e.src.Chain, cur.Seq, cur.Hash)
	var pending []audit.Line
	var backoff time.Duration
	failing, lastErr := false, "" // logged once per cause, not once per retry
	for {
		if len(pending) == 0 {
			var err error
			pending, err = e.read(f, &cur)
			if errors.Is(err, audit.ErrNotFollowing) {
				f = audit.NewFollower(e.src.Dir, e.src.Chain, 0, "")
				continue
			}
		}
		wait := e.cfg.Interval
		if len(pending) > 0 {
			if err := e.export(ctx, pending); err != nil {
				e.errors.Add(1)
				if msg := err.Error(); msg != lastErr {
					e.log.Warn("audit entries not sent to the collector; retrying", "from_seq", pending[0].Entry.Seq, "error", msg)
					lastErr = msg
				}
				failing = true
				backoff = min(max(2*backoff, e.cfg.Interval), maxBackoff)
				wait = backoff
			} else {
				cur = e.acknowledge(pending)
				if failing {
					e.log.Info("audit entries reach the collector again", "acked_seq", cur.Seq)
				}
				failing, backoff, lastErr = false, 0, ""
				pending, wait = nil, 0
			}
		}
		select {
		case <-ctx.Done():
			e.drain(f, pending)
			return
		case <-time.After(wait):
		}
	}
}

// read returns the next committed entries after cur. A chain that does
// not hold the cursor's entry (the audit directory was replaced, the
// cursor file copied from elsewhere) is sent again from its start: a
// SIEM that receives an entry twice can tell by its hash, one that never
// receives it cannot.
func (e *Exporter) read(f *audit.Follower, cur *cursor) ([]audit.Line, error) {
	lines, err := f.Next(e.src.Durable(), e.cfg.BatchSize, maxBatchBytes)
	switch {
	case errors.Is(err, audit.ErrNotFollowing):
		e.log.Error("the audit chain does not hold the entry the OTLP cursor names; sending the chain from its start", "cursor_seq", cur.Seq, "error", err.Error())
		*cur = cursor{Chain: e.src.Chain}
		e.acked.Store(0)
		return nil, err
	case err != nil:
		e.errors.Add(1)
		e.log.Error("reading the audit chain to send it", "error", err.Error())
	}
	return lines, err
}

// export makes one export call, within the configured timeout.
func (e *Exporter) export(ctx context.Context, lines []audit.Line) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	rejected, err := e.send.export(ctx, request(e.res, lines, time.Now()))
	if err != nil {
		return err
	}
	if rejected > 0 {
		// Acknowledged, so not resent: resending what the collector
		// refuses would stop the stream behind it for good.
		e.rejected.Add(uint64(rejected))
		e.log.Error("the collector refused audit entries", "count", rejected, "from_seq", lines[0].Entry.Seq, "to_seq", lines[len(lines)-1].Entry.Seq)
	}
	return nil
}

// acknowledge records an acknowledged batch: counters, then the cursor.
func (e *Exporter) acknowledge(lines []audit.Line) cursor {
	last := lines[len(lines)-1].Entry
	cur := cursor{Chain: e.src.Chain, Seq: last.Seq, Hash: last.Hash}
	e.exported.Add(uint64(len(lines)))
	e.acked.Store(last.Seq)
	e.lastSuccess.Store(time.Now().UnixNano())
	if err := e.saveCursor(cur); err != nil {
		// Sent all the same; after a restart they are sent again.
		e.log.Error("saving the OTLP cursor", "error", err.Error())
	}
	return cur
}

// drain is Run's last attempt at shutdown: what is pending and what was
// committed since, one export at a time, all within one timeout.
func (e *Exporter) drain(f *audit.Follower, pending []audit.Line) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Timeout)
	defer cancel()
	for ctx.Err() == nil {
		if len(pending) == 0 {
			var err error
			if pending, err = f.Next(e.src.Durable(), e.cfg.BatchSize, maxBatchBytes); err != nil || len(pending) == 0 {
				return
			}
		}
		if err := e.export(ctx, pending); err != nil {
			e.errors.Add(1)
			e.log.Warn("audit entries not sent before shutdown; they are sent after the restart", "from_seq", pending[0].Entry.Seq, "error", err.Error())
			return
		}
		e.acknowledge(pending)
		pending = nil
	}
}

// loadCursor reads the cursor; none (a first start) is seq 0. A cursor
// that does not read is logged and ignored: the chain is sent again from
// its start rather than skipped.
func (e *Exporter) loadCursor() cursor {
	cur := cursor{Chain: e.src.Chain}
	data, err := os.ReadFile(e.cursor)
	if errors.Is(err, os.ErrNotExist) {
		return cur
	}
	var c cursor
	if err == nil {
		err = json.Unmarshal(data, &c)
	}
	if err == nil && (c.Chain != e.src.Chain || c.Seq < 0) {
		err = fmt.Errorf("it names chain %q seq %d", c.Chain, c.Seq)
	}
	if err != nil {
		e.log.Error("the OTLP cursor does not read; sending the chain from its start", "file", e.cursor, "error", err.Error())
		return cur
	}
	e.acked.Store(c.Seq)
	return c
}

// saveCursor replaces the cursor file atomically: written beside it,
// fsynced, renamed over it, the directory fsynced.
func (e *Exporter) saveCursor(c cursor) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return audit.ReplaceFile(e.cursor, append(data, '\n'))
}
