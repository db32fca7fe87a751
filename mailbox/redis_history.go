package mailbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisHistory is a History shared by every replica: each thread is a Redis
// list <prefix>:h:<kind>:<id> whose key expires Retention after its last
// append, beside the set <prefix>:hid:<kind>:<id> of its senders' message
// ids (the repeat check) and, while it waits for a person, the string
// <prefix>:hs:<kind>:<id> (its Suspension as JSON).
type RedisHistory struct {
	client redis.UniversalClient
	opt    HistoryOptions
}

var _ History = (*RedisHistory)(nil)

// NewRedisHistory returns a history on client. The client stays the
// caller's.
func NewRedisHistory(client redis.UniversalClient, o HistoryOptions) *RedisHistory {
	return &RedisHistory{client: client, opt: o.withDefaults()}
}

// bound gives ctx the history's deadline (or keeps the caller's, if
// sooner): a Redis that hangs must not hang the request with it.
func (h *RedisHistory) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, h.opt.Timeout)
}

func (h *RedisHistory) key(t threadID) string {
	return h.opt.Prefix + ":h:" + t.kind + ":" + t.id
}

// idsKey is the set of the thread's seen keys, expiring with the thread.
func (h *RedisHistory) idsKey(t threadID) string {
	return h.opt.Prefix + ":hid:" + t.kind + ":" + t.id
}

// suspendedKey holds the thread's Suspension.
func (h *RedisHistory) suspendedKey(t threadID) string {
	return h.opt.Prefix + ":hs:" + t.kind + ":" + t.id
}

// Seen implements History.
func (h *RedisHistory) Seen(ctx context.Context, kind, id, sender, messageID string) (bool, error) {
	if err := checkKind(kind); err != nil {
		return false, err
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	ok, err := h.client.SIsMember(ctx, h.idsKey(threadID{kind, id}), seenKey(sender, messageID)).Result()
	if err != nil {
		return false, fmt.Errorf("mailbox: history seen %s: %w", messageID, err)
	}
	return ok, nil
}

// appendScript appends the records of one message to every thread key, or
// to none when one of the threads already holds one of its seen keys or
// would hold more than the maximum: the check and the append are one
// script, so two replicas appending the same message cannot both succeed.
//
// KEYS: the thread lists, then their id sets in the same order. ARGV[1] max
// entries per thread, ARGV[2] retention in ms, ARGV[3] the number k of seen
// keys, ARGV[4..3+k] the seen keys, ARGV[4+k..] the records. Returns {1, 0}
// when appended, {0, i} when thread i (1-based) is full, {2, i, j} when
// thread i holds seen key j already.
var appendScript = redis.NewScript(`
local max = tonumber(ARGV[1])
local n = #KEYS / 2
local k = tonumber(ARGV[3])
local records = #ARGV - 3 - k
for i = 1, n do
  for j = 1, k do
    if redis.call('SISMEMBER', KEYS[n + i], ARGV[3 + j]) == 1 then return {2, i, j} end
  end
end
for i = 1, n do
  if redis.call('LLEN', KEYS[i]) + records > max then return {0, i} end
end
for i = 1, n do
  redis.call('RPUSH', KEYS[i], unpack(ARGV, 4 + k))
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
  redis.call('SADD', KEYS[n + i], unpack(ARGV, 4, 3 + k))
  redis.call('PEXPIRE', KEYS[n + i], ARGV[2])
end
return {1, 0}
`)

// Append implements History.
func (h *RedisHistory) Append(ctx context.Context, es ...Entry) error {
	es, ts, keys, recs, err := h.stored(es)
	if err != nil || len(ts) == 0 {
		return err
	}
	args := scriptArgs(keys, recs, h.opt.MaxPerThread, h.opt.Retention.Milliseconds())
	ctx, cancel := h.bound(ctx)
	defer cancel()
	res, err := appendScript.Run(ctx, h.client, h.threadKeys(ts), args...).Int64Slice()
	if err != nil {
		return fmt.Errorf("mailbox: history append %s: %w", es[0].MessageID, err)
	}
	switch {
	case len(res) == 2 && res[0] == 1:
		return nil
	case len(res) == 2 && res[0] == 0 && res[1] >= 1 && int(res[1]) <= len(ts):
		t := ts[res[1]-1]
		return fmt.Errorf("%w: %s thread %q holds %d entries", ErrFull, t.kind, t.id, h.opt.MaxPerThread)
	case len(res) == 3 && res[0] == 2 && res[1] >= 1 && int(res[1]) <= len(ts) && res[2] >= 1 && int(res[2]) <= len(keys):
		return duplicateError(ts[res[1]-1], keys[res[2]-1])
	}
	// A reply of a shape this code did not write: do not take it for
	// success.
	return fmt.Errorf("mailbox: history append %s: unexpected reply %v", es[0].MessageID, res)
}

// stored is the entries of one Append or Retract as the history stores
// them (batch), their threads, seen keys and records. Append and Retract
// share it: the same entry yields the same record, which is how Retract
// finds what Append stored.
func (h *RedisHistory) stored(es []Entry) ([]Entry, []threadID, []string, [][]byte, error) {
	es, ts, keys, err := batch(es, time.Now())
	if err != nil || len(ts) == 0 {
		return nil, nil, nil, nil, err
	}
	recs := make([][]byte, 0, len(es))
	for _, e := range es {
		rec, err := encodeEntry(e)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		recs = append(recs, rec)
	}
	return es, ts, keys, recs, nil
}

// threadKeys are the lists of ts, then their id sets.
func (h *RedisHistory) threadKeys(ts []threadID) []string {
	keys := make([]string, 2*len(ts))
	for i, t := range ts {
		keys[i] = h.key(t)
		keys[len(ts)+i] = h.idsKey(t)
	}
	return keys
}

// retractScript removes, from every thread, the last record equal to each
// of ARGV[k+2..], and the seen keys ARGV[2..k+1] (k = ARGV[1]). KEYS as
// appendScript's: the lists, then the id sets.
var retractScript = redis.NewScript(`
local n = #KEYS / 2
local k = tonumber(ARGV[1])
for i = 1, n do
  for r = k + 2, #ARGV do
    redis.call('LREM', KEYS[i], -1, ARGV[r])
  end
  redis.call('SREM', KEYS[n + i], unpack(ARGV, 2, k + 1))
end
return 1
`)

// scriptArgs is the ARGV of the append and retract scripts: the head
// values, the number of keys, the keys, then the records.
func scriptArgs(keys []string, recs [][]byte, head ...any) []any {
	args := make([]any, 0, len(head)+1+len(keys)+len(recs))
	args = append(args, head...)
	args = append(args, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	for _, r := range recs {
		args = append(args, r)
	}
	return args
}

// Retract implements History. The records removed are the ones Append
// stored for es (stored).
func (h *RedisHistory) Retract(ctx context.Context, es ...Entry) error {
	es, ts, keys, recs, err := h.stored(es)
	if err != nil || len(ts) == 0 {
		return err
	}
	args := scriptArgs(keys, recs)
	ctx, cancel := h.bound(ctx)
	defer cancel()
	if err := retractScript.Run(ctx, h.client, h.threadKeys(ts), args...).Err(); err != nil {
		return fmt.Errorf("mailbox: history retract %s: %w", es[0].MessageID, err)
	}
	return nil
}

// suspendScript stores ARGV[1] at KEYS[1] for ARGV[2] ms unless the key
// exists; it returns {1, ARGV[1]} when it stored it, else {0, the value
// there}.
var suspendScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1, ARGV[1]} end
return {0, redis.call('GET', KEYS[1])}
`)

// Suspend implements History.
func (h *RedisHistory) Suspend(ctx context.Context, s Suspension) (Suspension, bool, error) {
	if err := s.check(); err != nil {
		return Suspension{}, false, err
	}
	if s.At.IsZero() {
		s.At = time.Now()
	}
	s.At = s.At.Round(0).UTC()
	b, err := json.Marshal(s)
	if err != nil {
		return Suspension{}, false, fmt.Errorf("mailbox: encode suspension of %s %q: %w", s.Kind, s.ID, err)
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	res, err := suspendScript.Run(ctx, h.client, []string{h.suspendedKey(threadID{s.Kind, s.ID})}, b, h.opt.Retention.Milliseconds()).Slice()
	if err != nil {
		return Suspension{}, false, fmt.Errorf("mailbox: suspend %s %q: %w", s.Kind, s.ID, err)
	}
	if len(res) != 2 {
		return Suspension{}, false, fmt.Errorf("mailbox: suspend %s %q: unexpected reply %v", s.Kind, s.ID, res)
	}
	created, _ := res[0].(int64)
	raw, _ := res[1].(string)
	if raw == "" {
		return Suspension{}, false, fmt.Errorf("mailbox: suspend %s %q: unexpected reply %v", s.Kind, s.ID, res)
	}
	cur, err := decodeSuspension(raw)
	if err != nil {
		return Suspension{}, false, fmt.Errorf("mailbox: suspend %s %q: %w", s.Kind, s.ID, err)
	}
	return cur, created == 1, nil
}

// decodeSuspension reads a stored Suspension; one without an escalation
// is refused rather than taken for a thread nobody can resume.
func decodeSuspension(raw string) (Suspension, error) {
	var s Suspension
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return Suspension{}, fmt.Errorf("decode suspension: %w", err)
	}
	if err := s.check(); err != nil {
		return Suspension{}, fmt.Errorf("decode suspension: %w", err)
	}
	return s, nil
}

// Suspended implements History.
func (h *RedisHistory) Suspended(ctx context.Context, kind, id string) (Suspension, bool, error) {
	if err := checkKind(kind); err != nil {
		return Suspension{}, false, err
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	raw, err := h.client.Get(ctx, h.suspendedKey(threadID{kind, id})).Result()
	if errors.Is(err, redis.Nil) {
		return Suspension{}, false, nil
	}
	if err != nil {
		return Suspension{}, false, fmt.Errorf("mailbox: suspension of %s %q: %w", kind, id, err)
	}
	s, err := decodeSuspension(raw)
	if err != nil {
		return Suspension{}, false, fmt.Errorf("mailbox: suspension of %s %q: %w", kind, id, err)
	}
	return s, true, nil
}

// resumeScript deletes KEYS[1] when the suspension stored there is the one
// of escalation ARGV[1]; it returns 1 when it did.
var resumeScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local ok, s = pcall(cjson.decode, v)
if not ok or type(s) ~= 'table' or s['escalation_id'] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`)

// Resume implements History.
func (h *RedisHistory) Resume(ctx context.Context, kind, id, escalationID string) (bool, error) {
	if err := checkKind(kind); err != nil {
		return false, err
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	n, err := resumeScript.Run(ctx, h.client, []string{h.suspendedKey(threadID{kind, id})}, escalationID).Int64()
	if err != nil {
		return false, fmt.Errorf("mailbox: resume %s %q: %w", kind, id, err)
	}
	return n == 1, nil
}

// List implements History.
func (h *RedisHistory) List(ctx context.Context, kind, id string, limit int) ([]Entry, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	stop := int64(-1)
	if limit > 0 {
		stop = int64(limit) - 1
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	recs, err := h.client.LRange(ctx, h.key(threadID{kind, id}), 0, stop).Result()
	if err != nil {
		return nil, fmt.Errorf("mailbox: history list %s %q: %w", kind, id, err)
	}
	out := make([]Entry, 0, len(recs))
	for _, r := range recs {
		e, err := decodeEntry([]byte(r))
		if err != nil {
			return nil, fmt.Errorf("mailbox: history list %s %q: %w", kind, id, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// encodeEntry is the stored form of an entry: its fields but the envelope as
// compact JSON, a newline, then the envelope bytes verbatim. Marshalling the
// envelope as a json.RawMessage would compact it and escape <, > and &;
// the history keeps it byte for byte as relayed.
func encodeEntry(e Entry) ([]byte, error) {
	env := e.Envelope
	e.Envelope = nil
	meta, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("mailbox: encode history entry %s: %w", e.MessageID, err)
	}
	// json.Marshal output never holds a raw newline: strings escape it and
	// no indentation is added, so the first newline ends the fields.
	out := make([]byte, 0, len(meta)+1+len(env))
	out = append(out, meta...)
	out = append(out, '\n')
	return append(out, env...), nil
}

// decodeEntry reverses encodeEntry.
func decodeEntry(b []byte) (Entry, error) {
	meta, env, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return Entry{}, errors.New("decode history entry: no envelope separator")
	}
	var e Entry
	if err := json.Unmarshal(meta, &e); err != nil {
		return Entry{}, fmt.Errorf("decode history entry: %w", err)
	}
	e.Envelope = nil
	if len(env) > 0 {
		e.Envelope = bytes.Clone(env)
	}
	return e, nil
}
