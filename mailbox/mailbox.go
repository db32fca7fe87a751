// Package mailbox holds the gateway's inter-agent message queue and message
// history (docs/agent-messaging.md).
//
// EVENT/notification messages are acknowledged 202 before they reach their
// recipient, so they wait in a Queue that background workers Pop, deliver and
// Ack. MemoryQueue serves a single replica; RedisQueue (one Redis Stream per
// priority, one consumer group) lets several replicas share the work so that
// each delivery goes to exactly one replica at a time, and a replica that
// dies mid-delivery loses nothing: what it popped and never acknowledged is
// taken over by another replica after RedisQueueOptions.ClaimIdle. A
// delivery handed out MaxDeliveries times without being acknowledged, or
// given up by its worker (DeadLetter), leaves the queue for a capped
// dead-letter list an operator reads (DeadLetters).
//
// Every relayed message is also appended to a History, read back by workflow
// or correlation id. MemoryHistory and RedisHistory are append-only; threads
// disappear only through retention. The History also refuses a message_id
// its sender already used in the thread, in the same step as the append, so
// that replicas racing with the same message cannot both accept it, and
// keeps which threads are suspended waiting for a person.
package mailbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"
)

// ErrFull is returned when a queue or a history thread is at capacity. The
// caller answers 503: nothing it acknowledged earlier is lost.
var ErrFull = errors.New("mailbox: full")

// ErrDuplicate is returned by History.Append when a thread already holds a
// message of the same sender with the same message_id: the message was
// accepted before (a client retrying a POST whose answer it lost) and must
// not be delivered twice.
var ErrDuplicate = errors.New("mailbox: message_id already in the thread")

// Priorities run from 0 (critical, served first) to numPriorities-1 (low).
const (
	numPriorities = 4
	lowPriority   = numPriorities - 1
)

// Defaults shared by the queues and the Redis history.
const (
	// DefaultMaxDeliveries is how many times a delivery is handed out
	// without being acknowledged before it becomes a dead letter.
	DefaultMaxDeliveries = 5
	// DefaultDeadLetterMax caps the dead-letter list (the oldest go first).
	DefaultDeadLetterMax = 1000
	// DefaultRedisTimeout bounds every Redis call of the queue and the
	// history whose caller's context has no sooner deadline.
	DefaultRedisTimeout = 2 * time.Second
)

// orDefault is v when it is positive, else def: an option left zero (or
// set below zero) takes its default.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Delivery is one message to hand to one recipient.
type Delivery struct {
	ID string // set by Push (memory: sequence; Redis: stream entry id, unique only together with Priority); "" on input
	// DeliveryID is the gateway's own id of this hand-over, a UUIDv4 (Push
	// makes one when it is empty). It stays the same through reclaims and
	// into the dead-letter list, so an operator can follow one delivery.
	DeliveryID string
	MessageID  string
	Sender     string
	Recipient  string
	Priority   int    // 0 (critical) is served first ... 3 (low); values outside 0..3 are clamped
	Body       []byte // the exact bytes to POST to the recipient
	EnqueuedAt time.Time
	// ExpiresAt, when set, is when the delivery stops being worth making
	// (the envelope's metadata.ttl_ms from its acceptance): a worker that
	// pops it later records it expired instead of handing it over.
	ExpiresAt time.Time
	Reclaimed bool // true when this delivery was taken over from a consumer that stopped without Ack
	// Deliveries is how many times the queue has handed this delivery
	// out, this time included (1 on its first Pop). It survives reclaims:
	// that is how a delivery that makes every worker fail is recognised.
	Deliveries int
}

// DeadLetter is a delivery the gateway gave up on.
type DeadLetter struct {
	Delivery Delivery
	// Reason says why, in the gateway's words (never the recipient's).
	Reason string
	At     time.Time
}

// Queue hands deliveries to workers, highest priority first.
//
// Delivery is at least once: a delivery that is popped and not acknowledged
// (its worker died) is handed out again — by RedisQueue after ClaimIdle — so
// recipients should tolerate a repeated MessageID. After MaxDeliveries
// hand-outs it is not handed out again but moved to the dead letters.
type Queue interface {
	// Push enqueues d and returns it with ID, DeliveryID (if empty) and
	// EnqueuedAt (if zero) set and Priority clamped. ErrFull when the
	// queue is at capacity.
	Push(ctx context.Context, d Delivery) (Delivery, error)
	// Pop waits for the next delivery: lowest Priority first, FIFO within a
	// priority. Returns ctx.Err() when ctx ends.
	Pop(ctx context.Context) (Delivery, error)
	// Ack removes a popped delivery for good. Acknowledging twice is not an
	// error.
	Ack(ctx context.Context, d Delivery) error
	// DeadLetter removes a popped delivery for good, as Ack does, and
	// keeps it in the dead-letter list with reason: its hand-over failed
	// and will not be retried.
	DeadLetter(ctx context.Context, d Delivery, reason string) error
	// DeadLetters lists the dead letters, newest first, at most limit
	// (≤0: every one kept).
	DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error)
	// Len is the number of deliveries waiting plus those in flight (popped,
	// not acknowledged); capacity applies to it. Dead letters do not count.
	Len(ctx context.Context) (int64, error)
}

// forPush is d as a queue takes it in: its priority in range, not yet
// handed out, stamped with when it was queued and with a delivery id when
// it has none.
func (d Delivery) forPush() Delivery {
	d.Priority = clampPriority(d.Priority)
	d.Reclaimed, d.Deliveries = false, 0
	if d.EnqueuedAt.IsZero() {
		d.EnqueuedAt = time.Now()
	}
	if d.DeliveryID == "" {
		d.DeliveryID = NewID()
	}
	return d
}

// clampPriority maps any int onto 0..lowPriority, so a bad priority from an
// envelope can never index out of range.
func clampPriority(p int) int {
	return min(max(p, 0), lowPriority)
}

// NewID returns a random UUID (version 4, RFC 9562: 8-4-4-4-12 hex digits,
// version and variant bits set) from crypto/rand: the ids the gateway makes
// for messages and deliveries, which nobody must be able to guess or
// collide with.
func NewID() string {
	var b [16]byte
	// crypto/rand.Read never returns an error (it panics if the system
	// has no randomness at all).
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], b[10:16])
	return string(out[:])
}
