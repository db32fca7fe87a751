// Package mailbox holds the gateway's inter-agent message queue and message
// history (docs/agent-messaging.md).
//
// EVENT/notification messages are acknowledged 202 before they reach their
// recipient, so they wait in a Queue that background workers Pop, deliver and
// Ack. MemoryQueue serves a single replica; RedisQueue (one Redis Stream per
// priority, one consumer group) lets several replicas share the work so that
// each delivery goes to exactly one replica at a time, and a replica that
// dies mid-delivery loses nothing: what it popped and never acknowledged is
// taken over by another replica after RedisQueueOptions.ClaimIdle.
//
// Every relayed message is also appended to a History, read back by workflow
// or correlation id. MemoryHistory and RedisHistory are append-only; threads
// disappear only through retention.
package mailbox

import (
	"context"
	"errors"
	"time"
)

// ErrFull is returned when a queue or a history thread is at capacity. The
// caller answers 503: nothing it acknowledged earlier is lost.
var ErrFull = errors.New("mailbox: full")

// Priorities run from 0 (critical, served first) to numPriorities-1 (low).
const (
	numPriorities = 4
	lowPriority   = numPriorities - 1
)

// Delivery is one message to hand to one recipient.
type Delivery struct {
	ID         string // set by Push (memory: sequence; Redis: stream entry id, unique only together with Priority); "" on input
	MessageID  string
	Sender     string
	Recipient  string
	Priority   int    // 0 (critical) is served first ... 3 (low); values outside 0..3 are clamped
	Body       []byte // the exact bytes to POST to the recipient
	EnqueuedAt time.Time
	Reclaimed  bool // true when this delivery was taken over from a consumer that stopped without Ack
}

// Queue hands deliveries to workers, highest priority first.
//
// Delivery is at least once: a delivery that is popped and not acknowledged
// (its worker died) is handed out again — by RedisQueue after ClaimIdle — so
// recipients should tolerate a repeated MessageID.
type Queue interface {
	// Push enqueues d and returns it with ID (and EnqueuedAt if zero) set
	// and Priority clamped. ErrFull when the queue is at capacity.
	Push(ctx context.Context, d Delivery) (Delivery, error)
	// Pop waits for the next delivery: lowest Priority first, FIFO within a
	// priority. Returns ctx.Err() when ctx ends.
	Pop(ctx context.Context) (Delivery, error)
	// Ack removes a popped delivery for good. Acknowledging twice is not an
	// error.
	Ack(ctx context.Context, d Delivery) error
	// Len is the number of deliveries waiting plus those in flight (popped,
	// not acknowledged); capacity applies to it.
	Len(ctx context.Context) (int64, error)
}

// clampPriority maps any int onto 0..lowPriority, so a bad priority from an
// envelope can never index out of range.
func clampPriority(p int) int {
	return min(max(p, 0), lowPriority)
}
