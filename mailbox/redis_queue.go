package mailbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of RedisQueueOptions and HistoryOptions.Prefix.
const (
	// DefaultRedisPrefix keeps every mailbox key in one Redis Cluster slot
	// (the {hash tag}): Pop and Push touch the four priority streams in one
	// command or script, which Cluster allows only within a slot.
	DefaultRedisPrefix = "{gw:mbox}"
	DefaultClaimIdle   = time.Minute
	DefaultBlock       = time.Second
	DefaultRedisMaxLen = 100000
)

// redisGroup is the consumer group every replica reads through: a group
// hands each stream entry to one consumer only.
const redisGroup = "gateway"

// Stream entry fields.
const (
	fieldDeliveryID = "did"
	fieldMessageID  = "mid"
	fieldSender     = "from"
	fieldRecipient  = "to"
	fieldEnqueued   = "at" // Unix nanoseconds
	fieldExpires    = "ex" // Unix nanoseconds; absent: no expiry
	fieldBody       = "body"
)

// RedisQueueOptions configures a RedisQueue. Zero values take the defaults.
type RedisQueueOptions struct {
	Prefix    string        // key prefix, default DefaultRedisPrefix; keep a {hash tag} in it for Redis Cluster
	Consumer  string        // this replica's consumer name (unique per process), default hostname-pid
	ClaimIdle time.Duration // a delivery popped and not acked for this long is taken over by another consumer (XAUTOCLAIM); default 1m
	Block     time.Duration // longest single blocking wait before re-checking priorities and claims; default 1s
	MaxLen    int64         // capacity across priorities (ErrFull above it); default 100000
	// MaxDeliveries is how many times a delivery is handed out (read or
	// claimed) without being acknowledged before it becomes a dead letter;
	// default DefaultMaxDeliveries. The count lives in Redis, so it
	// survives reclaims by other replicas.
	MaxDeliveries int
	// DeadLetterMax caps the dead-letter list <prefix>:dead (the oldest go
	// first); default DefaultDeadLetterMax.
	DeadLetterMax int
	// Timeout bounds each Redis call when the caller's context has no
	// sooner deadline (a blocking wait gets Block on top); default
	// DefaultRedisTimeout.
	Timeout time.Duration
}

// RedisQueue is a Queue shared by every replica through Redis: one stream per
// priority (<prefix>:q:0 … <prefix>:q:3) read through the consumer group
// "gateway". An entry stays in its stream, pending for the consumer that
// popped it, until Ack deletes it; so Len counts in-flight deliveries, and
// entries of a consumer that died are claimed by another after ClaimIdle.
//
// ClaimIdle must exceed the longest time a worker holds a popped delivery
// (delivery with retries): a delivery held longer is handed out again.
//
// Pop picks the next entry with one script that tries the streams in
// priority order, so a lower priority is never served while a higher one
// waits. When all are empty the script also returns each stream's newest
// entry id, and Pop waits with a plain XREAD BLOCK after those ids: that
// read consumes nothing (the woken Pop runs the script again), so no entry is
// ever held back by a consumer that woke for it, and nothing pushed between
// the script and the wait is missed.
//
// How often each pending entry was handed out is kept in the hash
// <prefix>:qn (field "<priority>:<entry id>", deleted with the entry); a
// claim that would hand an entry out more than MaxDeliveries times moves it
// to the list <prefix>:dead instead (newest first, capped at
// DeadLetterMax), as DeadLetter does for a delivery its worker gave up.
type RedisQueue struct {
	client        redis.UniversalClient
	keys          [numPriorities]string
	countsKey     string
	deadKey       string
	consumer      string
	claimIdle     time.Duration
	block         time.Duration
	timeout       time.Duration
	maxLen        int64
	maxDeliveries int
	deadMax       int
	// nextClaim is when the next XAUTOCLAIM sweep is due (Unix ns).
	nextClaim atomic.Int64
}

var _ Queue = (*RedisQueue)(nil)

// NewRedisQueue returns a queue on client, creating the streams and the
// consumer group when missing. The client stays the caller's.
func NewRedisQueue(client redis.UniversalClient, o RedisQueueOptions) (*RedisQueue, error) {
	if client == nil {
		return nil, errors.New("mailbox: redis queue: nil client")
	}
	if o.Prefix == "" {
		o.Prefix = DefaultRedisPrefix
	}
	if o.Consumer == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "gateway"
		}
		o.Consumer = host + "-" + strconv.Itoa(os.Getpid())
	}
	q := &RedisQueue{client: client, consumer: o.Consumer,
		claimIdle:     orDefault(o.ClaimIdle, DefaultClaimIdle),
		block:         orDefault(o.Block, DefaultBlock),
		timeout:       orDefault(o.Timeout, DefaultRedisTimeout),
		maxLen:        orDefault(o.MaxLen, DefaultRedisMaxLen),
		maxDeliveries: orDefault(o.MaxDeliveries, DefaultMaxDeliveries),
		deadMax:       orDefault(o.DeadLetterMax, DefaultDeadLetterMax),
		countsKey:     o.Prefix + ":qn", deadKey: o.Prefix + ":dead"}
	for p := range q.keys {
		q.keys[p] = o.Prefix + ":q:" + strconv.Itoa(p)
	}
	if err := q.ensureGroups(context.Background()); err != nil {
		// Redis may be down while the gateway starts: Pop creates the
		// groups when it first finds them missing (NOGROUP), so the
		// queue is usable once Redis is back.
		return q, fmt.Errorf("mailbox: redis queue: create groups (retried on use): %w", err)
	}
	return q, nil
}

// bound gives ctx the queue's deadline (or keeps the caller's, if sooner):
// a Redis that hangs must not hang a request or a worker with it.
func (q *RedisQueue) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, q.timeout)
}

// countField is an entry's field in the hand-out counts hash.
func countField(prio int, id string) string { return strconv.Itoa(prio) + ":" + id }

// ensureGroups creates each stream and its group. The group starts at "0":
// after Redis lost its data, entries pushed before the group was recreated
// are still delivered.
func (q *RedisQueue) ensureGroups(ctx context.Context) error {
	for _, key := range q.keys {
		cctx, cancel := q.bound(ctx)
		err := q.client.XGroupCreateMkStream(cctx, key, redisGroup, "0").Err()
		cancel()
		if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
			return fmt.Errorf("mailbox: create group on %s: %w", key, err)
		}
	}
	return nil
}

// isNoGroup reports whether err says a stream or its group is gone (Redis
// restarted empty, or someone deleted the key).
func isNoGroup(err error) bool {
	return err != nil && strings.Contains(err.Error(), "NOGROUP")
}

// pushScript appends an entry unless the streams together hold maxLen.
//
// KEYS[1..4] the streams; ARGV[1] maxLen, ARGV[2] index (1-based) of the
// target stream, ARGV[3..] field/value pairs. Returns the entry id, or nil
// when full.
var pushScript = redis.NewScript(`
local total = 0
for i = 1, #KEYS do total = total + redis.call('XLEN', KEYS[i]) end
if total >= tonumber(ARGV[1]) then return false end
return redis.call('XADD', KEYS[tonumber(ARGV[2])], '*', unpack(ARGV, 3))
`)

// Push implements Queue.
func (q *RedisQueue) Push(ctx context.Context, d Delivery) (Delivery, error) {
	d = d.forPush()
	ctx, cancel := q.bound(ctx)
	defer cancel()
	args := []any{q.maxLen, d.Priority + 1,
		fieldDeliveryID, d.DeliveryID,
		fieldMessageID, d.MessageID,
		fieldSender, d.Sender,
		fieldRecipient, d.Recipient,
		fieldEnqueued, d.EnqueuedAt.UnixNano(),
		fieldBody, d.Body,
	}
	if !d.ExpiresAt.IsZero() {
		args = append(args, fieldExpires, d.ExpiresAt.UnixNano())
	}
	id, err := pushScript.Run(ctx, q.client, q.keys[:], args...).Text()
	if errors.Is(err, redis.Nil) {
		return Delivery{}, fmt.Errorf("%w: %d deliveries queued", ErrFull, q.maxLen)
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("mailbox: push %s: %w", d.MessageID, err)
	}
	d.ID = id
	return d, nil
}

// readScript hands this consumer the oldest new entry of the highest
// priority stream that has one, and counts the hand-out.
//
// KEYS[1..4] the streams by priority, KEYS[5] the hand-out counts; ARGV[1]
// group, ARGV[2] consumer. Returns {priority, id, {field, value, ...},
// hand-outs}, or {-1, newest id of each stream ("0-0" when empty)} when
// there is nothing new.
var readScript = redis.NewScript(`
local streams = #KEYS - 1
for i = 1, streams do
  local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', 1, 'STREAMS', KEYS[i], '>')
  if r and r[1] and r[1][2][1] then
    local e = r[1][2][1]
    local n = redis.call('HINCRBY', KEYS[#KEYS], (i - 1) .. ':' .. e[1], 1)
    return {i - 1, e[1], e[2], n}
  end
end
local out = {-1}
for i = 1, streams do
  local r = redis.call('XREVRANGE', KEYS[i], '+', '-', 'COUNT', 1)
  if r[1] then out[#out + 1] = r[1][1] else out[#out + 1] = '0-0' end
end
return out
`)

// Pop implements Queue. It returns Redis errors as they come; the caller
// backs off and calls again.
func (q *RedisQueue) Pop(ctx context.Context) (Delivery, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Delivery{}, err
		}
		d, ok, err := q.claim(ctx)
		var newest []string
		if err == nil && !ok {
			d, ok, newest, err = q.read(ctx)
		}
		if err == nil && !ok {
			err = q.wait(ctx, newest)
		}
		switch {
		case ctx.Err() != nil:
			// A delivery read just as ctx ended stays pending and is
			// claimed again after ClaimIdle; returning it would hand
			// it to a caller that has stopped.
			return Delivery{}, ctx.Err()
		case isNoGroup(err):
			if err := q.ensureGroups(ctx); err != nil {
				return Delivery{}, err
			}
		case err != nil:
			return Delivery{}, fmt.Errorf("mailbox: pop: %w", err)
		case ok:
			return d, nil
		}
	}
}

// claim takes over one delivery that another consumer popped and has not
// acknowledged for ClaimIdle. A sweep runs at most every ClaimIdle/2, but
// once it finds something the next Pop sweeps again, so the backlog of a
// dead replica drains at full speed. A claimed delivery goes before new
// ones of any priority: it is already overdue by ClaimIdle. One handed out
// MaxDeliveries times already is buried instead, and the sweep goes on.
func (q *RedisQueue) claim(ctx context.Context) (Delivery, bool, error) {
	now := time.Now().UnixNano()
	if now < q.nextClaim.Load() {
		return Delivery{}, false, nil
	}
	for p, key := range q.keys {
		start := "0-0"
		for {
			msgs, next, err := q.autoClaim(ctx, key, start)
			if err != nil {
				return Delivery{}, false, err
			}
			if len(msgs) > 0 {
				d := deliveryFromMap(msgs[0].ID, p, msgs[0].Values)
				d.Reclaimed = true
				n, err := q.countHandout(ctx, d)
				if err != nil {
					return Delivery{}, false, err
				}
				if n <= q.maxDeliveries {
					d.Deliveries = n
					return d, true, nil
				}
				d.Deliveries = n - 1
				if err := q.bury(ctx, d, unackedReason(d.Deliveries)); err != nil {
					return Delivery{}, false, err
				}
				// The entry is gone from the stream: look again from the
				// same place.
				continue
			}
			// COUNT 1 looks at no more than ten pending entries per
			// call; follow the cursor through the rest.
			if next == "" || next == "0-0" {
				break
			}
			start = next
		}
	}
	q.nextClaim.Store(now + int64(q.claimIdle/2))
	return Delivery{}, false, nil
}

// autoClaim is one XAUTOCLAIM of at most one entry of key, from start.
func (q *RedisQueue) autoClaim(ctx context.Context, key, start string) ([]redis.XMessage, string, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	return q.client.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: key, Group: redisGroup, Consumer: q.consumer,
		MinIdle: q.claimIdle, Start: start, Count: 1,
	}).Result()
}

// countHandout counts one more hand-out of d and returns the count.
func (q *RedisQueue) countHandout(ctx context.Context, d Delivery) (int, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	n, err := q.client.HIncrBy(ctx, q.countsKey, countField(d.Priority, d.ID), 1).Result()
	if err != nil {
		return 0, fmt.Errorf("count hand-out of %s: %w", d.ID, err)
	}
	return int(n), nil
}

// read runs readScript: a delivery, or the newest id of each stream to wait
// after.
func (q *RedisQueue) read(ctx context.Context) (Delivery, bool, []string, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	keys := append(q.keys[:len(q.keys):len(q.keys)], q.countsKey)
	res, err := readScript.Run(ctx, q.client, keys, redisGroup, q.consumer).Slice()
	if err != nil {
		return Delivery{}, false, nil, err
	}
	if len(res) == 0 {
		return Delivery{}, false, nil, errors.New("empty read reply")
	}
	p, _ := res[0].(int64)
	if p < 0 {
		newest := make([]string, 0, numPriorities)
		for _, v := range res[1:] {
			s, _ := v.(string)
			if s == "" {
				s = "0-0"
			}
			newest = append(newest, s)
		}
		if len(newest) != numPriorities {
			return Delivery{}, false, nil, fmt.Errorf("read reply has %d stream ids", len(newest))
		}
		return Delivery{}, false, newest, nil
	}
	if len(res) != 4 || p >= numPriorities {
		return Delivery{}, false, nil, fmt.Errorf("malformed read reply of %d elements", len(res))
	}
	id, _ := res[1].(string)
	pairs, _ := res[2].([]any)
	n, _ := res[3].(int64)
	d := deliveryFromPairs(id, int(p), pairs)
	d.Deliveries = int(n)
	return d, true, nil, nil
}

// wait blocks until an entry newer than newest lands in any stream, or Block
// passes. It consumes nothing.
func (q *RedisQueue) wait(ctx context.Context, newest []string) error {
	streams := make([]string, 0, 2*numPriorities)
	streams = append(streams, q.keys[:]...)
	streams = append(streams, newest...)
	ctx, cancel := context.WithTimeout(ctx, q.block+q.timeout)
	defer cancel()
	err := q.client.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: 1, Block: q.block}).Err()
	if errors.Is(err, redis.Nil) { // Block passed
		return nil
	}
	return err
}

// Ack implements Queue: XACK, XDEL and the hand-out count in one
// transaction, so an entry is never left in its stream without being
// pending (it would count towards MaxLen forever).
func (q *RedisQueue) Ack(ctx context.Context, d Delivery) error {
	if d.ID == "" {
		return errors.New("mailbox: ack: delivery has no id")
	}
	p := clampPriority(d.Priority)
	key := q.keys[p]
	ctx, cancel := q.bound(ctx)
	defer cancel()
	_, err := q.client.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		pl.XAck(ctx, key, redisGroup, d.ID)
		pl.XDel(ctx, key, d.ID)
		pl.HDel(ctx, q.countsKey, countField(p, d.ID))
		return nil
	})
	if err != nil {
		return fmt.Errorf("mailbox: ack %s: %w", d.ID, err)
	}
	return nil
}

// buryScript moves a pending entry to the dead letters: XACK, XDEL, its
// hand-out count gone, the record pushed on the capped list. An entry no
// longer pending (acknowledged or buried by someone else) is left alone.
//
// KEYS[1] the stream, KEYS[2] the counts, KEYS[3] the dead letters; ARGV[1]
// group, ARGV[2] entry id, ARGV[3] its count field, ARGV[4] the record,
// ARGV[5] the cap. Returns 1 when it buried the entry.
var buryScript = redis.NewScript(`
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[3])
redis.call('LPUSH', KEYS[3], ARGV[4])
redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[5]) - 1)
return 1
`)

// deadRecord is a dead letter as <prefix>:dead stores it.
type deadRecord struct {
	ID         string `json:"id"`
	Priority   int    `json:"priority"`
	DeliveryID string `json:"delivery_id"`
	MessageID  string `json:"message_id"`
	Sender     string `json:"sender"`
	Recipient  string `json:"recipient"`
	EnqueuedAt int64  `json:"enqueued_at"` // Unix ns
	Deliveries int    `json:"deliveries"`
	Body       []byte `json:"body"`
	Reason     string `json:"reason"`
	At         int64  `json:"at"` // Unix ns
}

// bury moves d, pending for this consumer, to the dead letters.
func (q *RedisQueue) bury(ctx context.Context, d Delivery, reason string) error {
	p := clampPriority(d.Priority)
	rec, err := json.Marshal(deadRecord{ID: d.ID, Priority: p, DeliveryID: d.DeliveryID, MessageID: d.MessageID, Sender: d.Sender,
		Recipient: d.Recipient, EnqueuedAt: d.EnqueuedAt.UnixNano(), Deliveries: d.Deliveries, Body: d.Body, Reason: reason,
		At: time.Now().UnixNano()})
	if err != nil {
		return fmt.Errorf("mailbox: encode dead letter %s: %w", d.ID, err)
	}
	ctx, cancel := q.bound(ctx)
	defer cancel()
	err = buryScript.Run(ctx, q.client, []string{q.keys[p], q.countsKey, q.deadKey},
		redisGroup, d.ID, countField(p, d.ID), rec, q.deadMax).Err()
	if err != nil {
		return fmt.Errorf("mailbox: dead letter %s: %w", d.ID, err)
	}
	return nil
}

// DeadLetter implements Queue.
func (q *RedisQueue) DeadLetter(ctx context.Context, d Delivery, reason string) error {
	if d.ID == "" {
		return errors.New("mailbox: dead letter: delivery has no id")
	}
	return q.bury(ctx, d, reason)
}

// DeadLetters implements Queue. A record that cannot be decoded is listed
// with what could be read and a reason saying so, rather than hiding the
// others.
func (q *RedisQueue) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	stop := int64(-1)
	if limit > 0 {
		stop = int64(limit) - 1
	}
	ctx, cancel := q.bound(ctx)
	defer cancel()
	recs, err := q.client.LRange(ctx, q.deadKey, 0, stop).Result()
	if err != nil {
		return nil, fmt.Errorf("mailbox: dead letters: %w", err)
	}
	out := make([]DeadLetter, 0, len(recs))
	for _, r := range recs {
		var dr deadRecord
		if err := json.Unmarshal([]byte(r), &dr); err != nil {
			out = append(out, DeadLetter{Reason: "unreadable dead-letter record: " + err.Error()})
			continue
		}
		out = append(out, DeadLetter{
			Delivery: Delivery{ID: dr.ID, Priority: clampPriority(dr.Priority), DeliveryID: dr.DeliveryID, MessageID: dr.MessageID,
				Sender: dr.Sender, Recipient: dr.Recipient, EnqueuedAt: time.Unix(0, dr.EnqueuedAt), Deliveries: dr.Deliveries, Body: dr.Body},
			Reason: dr.Reason, At: time.Unix(0, dr.At),
		})
	}
	return out, nil
}

// Len implements Queue.
func (q *RedisQueue) Len(ctx context.Context) (int64, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	var cmds [numPriorities]*redis.IntCmd
	_, err := q.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, key := range q.keys {
			cmds[i] = p.XLen(ctx, key)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("mailbox: queue length: %w", err)
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}

// deliveryFromPairs decodes a stream entry given as a flat field/value list.
// It never fails: an entry that cannot be decoded would otherwise stay
// pending and be claimed again forever.
func deliveryFromPairs(id string, prio int, pairs []any) Delivery {
	d := Delivery{ID: id, Priority: clampPriority(prio)}
	for i := 0; i+1 < len(pairs); i += 2 {
		name, _ := pairs[i].(string)
		val, _ := pairs[i+1].(string)
		setField(&d, name, val)
	}
	return d
}

// deliveryFromMap decodes a stream entry as go-redis returns it from
// XAUTOCLAIM.
func deliveryFromMap(id string, prio int, values map[string]any) Delivery {
	d := Delivery{ID: id, Priority: clampPriority(prio)}
	for name, v := range values {
		val, _ := v.(string)
		setField(&d, name, val)
	}
	return d
}

func setField(d *Delivery, name, val string) {
	switch name {
	case fieldDeliveryID:
		d.DeliveryID = val
	case fieldMessageID:
		d.MessageID = val
	case fieldSender:
		d.Sender = val
	case fieldRecipient:
		d.Recipient = val
	case fieldEnqueued:
		if ns, err := strconv.ParseInt(val, 10, 64); err == nil {
			d.EnqueuedAt = time.Unix(0, ns)
		}
	case fieldBody:
		d.Body = []byte(val)
	case fieldExpires:
		if ns, err := strconv.ParseInt(val, 10, 64); err == nil {
			d.ExpiresAt = time.Unix(0, ns)
		}
	}
}
