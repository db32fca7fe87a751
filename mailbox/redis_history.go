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
// append.
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

func (h *RedisHistory) key(t threadID) string {
	return h.opt.Prefix + ":h:" + t.kind + ":" + t.id
}

// idsKey is the set of the thread's seen keys, expiring with the thread.
func (h *RedisHistory) idsKey(t threadID) string {
	return h.opt.Prefix + ":hid:" + t.kind + ":" + t.id
}

// Seen implements History.
func (h *RedisHistory) Seen(ctx context.Context, kind, id, sender, messageID string) (bool, error) {
	if err := checkKind(kind); err != nil {
		return false, err
	}
	ok, err := h.client.SIsMember(ctx, h.idsKey(threadID{kind, id}), seenKey(sender, messageID)).Result()
	if err != nil {
		return false, fmt.Errorf("mailbox: history seen %s: %w", messageID, err)
	}
	return ok, nil
}

// appendScript appends one record to every thread key, or to none when one
// of them is full.
//
// KEYS the thread lists; ARGV[1] max entries per thread, ARGV[2] retention
// in ms, ARGV[3] the record. Returns 0 and the index (1-based) of the full
// key, or 1.
//
// The second half of KEYS are the threads' id sets (for Seen), in the same
// order; ARGV[4] is the entry's seen key.
var appendScript = redis.NewScript(`
local max = tonumber(ARGV[1])
local n = #KEYS / 2
for i = 1, n do
  if redis.call('LLEN', KEYS[i]) >= max then return {0, i} end
end
for i = 1, n do
  redis.call('RPUSH', KEYS[i], ARGV[3])
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
  redis.call('SADD', KEYS[n + i], ARGV[4])
  redis.call('PEXPIRE', KEYS[n + i], ARGV[2])
end
return {1, 0}
`)

// Append implements History.
func (h *RedisHistory) Append(ctx context.Context, e Entry) error {
	e, keys, rec, err := h.stored(e)
	if err != nil || keys == nil {
		return err
	}
	ts := e.threads()
	res, err := appendScript.Run(ctx, h.client, keys, h.opt.MaxPerThread, h.opt.Retention.Milliseconds(), rec, seenKey(e.Sender, e.MessageID)).Int64Slice()
	if err != nil {
		return fmt.Errorf("mailbox: history append %s: %w", e.MessageID, err)
	}
	if len(res) == 2 && res[0] == 0 && res[1] >= 1 && int(res[1]) <= len(ts) {
		t := ts[res[1]-1]
		return fmt.Errorf("%w: %s thread %q holds %d entries", ErrFull, t.kind, t.id, h.opt.MaxPerThread)
	}
	return nil
}

// stored is e as the history stores it (normalized), the keys of its
// threads (the lists, then the id sets; nil when it has no thread) and its
// record. Append and Retract share it: the same entry yields the same
// record, which is how Retract finds what Append stored.
func (h *RedisHistory) stored(e Entry) (Entry, []string, []byte, error) {
	e, err := normalize(e, time.Now())
	if err != nil {
		return e, nil, nil, err
	}
	ts := e.threads()
	if len(ts) == 0 {
		return e, nil, nil, nil
	}
	rec, err := encodeEntry(e)
	if err != nil {
		return e, nil, nil, err
	}
	keys := make([]string, 2*len(ts))
	for i, t := range ts {
		keys[i] = h.key(t)
		keys[len(ts)+i] = h.idsKey(t)
	}
	return e, keys, rec, nil
}

// retractScript removes, from every thread, the last record equal to
// ARGV[1], and the seen key ARGV[2]. KEYS as appendScript's: the lists,
// then the id sets.
var retractScript = redis.NewScript(`
local n = #KEYS / 2
for i = 1, n do
  redis.call('LREM', KEYS[i], -1, ARGV[1])
  redis.call('SREM', KEYS[n + i], ARGV[2])
end
return 1
`)

// Retract implements History. The record removed is the one Append stored
// for e (stored).
func (h *RedisHistory) Retract(ctx context.Context, e Entry) error {
	e, keys, rec, err := h.stored(e)
	if err != nil || keys == nil {
		return err
	}
	if err := retractScript.Run(ctx, h.client, keys, rec, seenKey(e.Sender, e.MessageID)).Err(); err != nil {
		return fmt.Errorf("mailbox: history retract %s: %w", e.MessageID, err)
	}
	return nil
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
