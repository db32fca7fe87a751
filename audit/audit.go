// Package audit implements the gateway's audit trail: an append-only,
// hash-chained, crash-safe log of JSON Lines entries that a third party can
// verify without the gateway (docs/compliance.md; the format in
// docs/reference.md, Audit format).
//
// One process writes one chain through a Log: Append hands a Record to a
// single writer goroutine that batches every pending entry into one write and
// one fsync (group commit), and returns only once the entry is durable.
// Verify recomputes every chain in a directory; Export selects entries and
// writes them with a manifest an auditor can check offline.
//
// The package imports nothing else of this repository but the units of its
// settings (internal/confkit), so the proxy, the approval API and the
// command line can all use it.
package audit

import (
	"encoding/json"
	"errors"
	"log/slog"
	"time"
)

// Entry kinds written by the gateway. Kind is free text; these constants
// keep the writers and the docs in step.
const (
	KindLLMRequest         = "llm.request"
	KindLLMResponse        = "llm.response"
	KindAuthFailure        = "auth.failure"
	KindRateLimitReject    = "ratelimit.reject"
	KindConfigReload       = "config.reload"
	KindAgentRequest       = "agent.request"
	KindAgentDecision      = "agent.decision"
	KindEscalationDecision = "escalation.decision"
	// KindRecovery records bytes a crash left torn and Open moved aside.
	KindRecovery = "audit.recovery"
	// KindLoss records appends that failed while the disk was unavailable,
	// written by the first batch after the log repairs itself, so a loss
	// shows in the chain instead of vanishing.
	KindLoss = "audit.loss"
)

// GenesisHash is the prev_hash of the first entry of every chain.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// MaxEntryBytes bounds one encoded entry, so the writer's memory stays
// bounded however many appends are queued. Larger records are refused with
// ErrTooLarge before they reach the writer.
const MaxEntryBytes = 1 << 20

var (
	// ErrUnavailable is wrapped by every error that means "the entry could
	// not be made durable": a failed write, fsync or rotation, or a closed
	// log. The proxy maps it to 503 audit_unavailable (fail_mode closed) or
	// counts the loss (fail_mode open).
	ErrUnavailable = errors.New("audit unavailable")
	// ErrClosed is returned (together with ErrUnavailable) by Append after Close.
	ErrClosed = errors.New("audit log closed")
	// ErrTooLarge is returned by Append for a record whose entry would
	// exceed MaxEntryBytes. It is the caller's bug, not the disk's, so it
	// does not wrap ErrUnavailable.
	ErrTooLarge = errors.New("audit entry too large")
	// ErrCorrupt is returned by Open when the chain on disk cannot be
	// resumed safely (damage that is not a torn tail, or entries missing
	// behind a checkpoint). Run `gateway audit verify` to locate it.
	ErrCorrupt = errors.New("audit chain corrupt")
	// ErrChainInUse is returned by Open when another process holds the
	// chain's lock: two writers of one chain would interleave entries.
	ErrChainInUse = errors.New("audit chain in use by another process")
)

// Record is what a caller appends. The writer adds seq, ts, chain,
// prev_hash and hash. Redact before you append: whatever is in Summary is
// written as it is, and a token, key or redacted value must never be.
type Record struct {
	Kind      string // required, e.g. KindLLMRequest
	AgentID   string
	SessionID string
	RequestID string
	// PayloadSHA256 is the lowercase hex SHA-256 of the exact bytes received
	// or sent, or empty when the entry has no payload.
	PayloadSHA256 string
	// Object holds the kind-specific facts (model, tokens, status, checks…),
	// built member by member into canonical JSON (RFC 8785). Nil is
	// written as {}.
	Object *Object
}

// Entry is one line of a segment. Fields appear in the file under their
// JSON names; docs/compliance.md states how Hash is computed.
type Entry struct {
	Seq           int64           `json:"seq"`
	TS            time.Time       `json:"ts"`
	Chain         string          `json:"chain"`
	Kind          string          `json:"kind"`
	AgentID       string          `json:"agent_id"`
	SessionID     string          `json:"session_id"`
	RequestID     string          `json:"request_id"`
	PayloadSHA256 string          `json:"payload_sha256"`
	Summary       json.RawMessage `json:"summary"` // canonical JSON object
	PrevHash      string          `json:"prev_hash"`
	Hash          string          `json:"hash"`
}

// Config configures a Log. The zero value of each optional field means the
// default stated beside it.
type Config struct {
	// Dir holds the segments, checkpoints and torn files; created (0750) if
	// missing. Required.
	Dir string
	// Chain is this instance's id (the lead defaults it to the pod or host
	// name). Letters, digits, '.', '_' and '-', at most 128, not starting
	// with '.' or '-'. Required.
	Chain string
	// SigningKeyFile is an ed25519 private key (PEM, PKCS#8 "PRIVATE KEY").
	// Empty means checkpoints are still written, but unsigned.
	SigningKeyFile string
	// SegmentMaxBytes rotates to a new segment before a write would take the
	// current one past this size. Zero means 64 MiB.
	SegmentMaxBytes int64
	// CheckpointEvery writes a checkpoint once this many entries were
	// appended since the last one. Zero means 1000; negative disables it.
	CheckpointEvery int
	// CheckpointInterval writes a checkpoint this often when entries were
	// appended since the last one. Zero means 60s; negative disables it.
	// Close always writes one if the chain moved.
	CheckpointInterval time.Duration
	// CommitDelay is how long the writer may hold a group commit open for
	// the entries of exchanges in progress (Log.Begin) that have none in
	// it yet, so that one fsync serves many of them (an entry then waits up
	// to this much longer to be durable; a lone client, or clients all
	// waiting on the batch already, never wait for it). Zero means 1ms;
	// negative disables it.
	CommitDelay time.Duration
	// Logger receives recoveries, write failures and repairs. Nil means
	// slog.Default().
	Logger *slog.Logger
}

const (
	defaultSegmentMaxBytes    = 64 << 20
	defaultCheckpointEvery    = 1000
	defaultCheckpointInterval = 60 * time.Second
	defaultCommitDelay        = time.Millisecond
)
