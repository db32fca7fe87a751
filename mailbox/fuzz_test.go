package mailbox

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"
)

// The stored history form round-trips any entry the history accepts.
func FuzzEntryCodec(f *testing.F) {
	for _, s := range envelopeSamples {
		f.Add("m1", "W", "C", "executor_1", "orch_1", int64(1763892000123456789), []byte(s))
	}
	f.Add("", "", "", "", "", int64(0), []byte(nil))
	f.Add("m\n2", "W\n", "C\x00", "s\u2028", "r\"", int64(-1), []byte("{\"a\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, id, wf, corr, sender, recipient string, at int64, env []byte) {
		e := Entry{MessageID: id, Type: "notification", Sender: sender, Recipients: []string{recipient},
			WorkflowID: wf, CorrelationID: corr, Origin: "agent", At: time.Unix(0, at).UTC(), Envelope: env}
		n, err := normalize(e, time.Unix(0, 0).UTC())
		if err != nil {
			if json.Valid(env) {
				t.Fatalf("normalize refused a valid envelope %q: %v", env, err)
			}
			return
		}
		b, err := encodeEntry(n)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		got, err := decodeEntry(b)
		if err != nil {
			t.Fatalf("decode %q: %v", b, err)
		}
		if string(got.Envelope) != string(n.Envelope) {
			t.Fatalf("envelope %q, want %q", got.Envelope, n.Envelope)
		}
		// JSON strings carry only valid UTF-8: other bytes become U+FFFD.
		// (Each string on its own: two invalid halves can make a valid
		// whole.)
		valid := true
		for _, s := range []string{id, wf, corr, sender, recipient} {
			valid = valid && utf8.ValidString(s)
		}
		if valid {
			if !reflect.DeepEqual(got, n) {
				t.Fatalf("round trip\n got %+v\nwant %+v", got, n)
			}
		}
	})
}

// Decoding whatever is stored under a history key never panics, and what
// decodes re-encodes to something that decodes the same.
func FuzzDecodeEntry(f *testing.F) {
	good, err := encodeEntry(entry("m", "W", "C"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("{}\n"))
	f.Add([]byte("{\"recipients\":[\"a\"]}\n\n\n"))
	f.Add([]byte("no newline"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEntry(b)
		if err != nil {
			return
		}
		b2, err := encodeEntry(e)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", e, err)
		}
		e2, err := decodeEntry(b2)
		if err != nil {
			t.Fatalf("decode re-encoded %q: %v", b2, err)
		}
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("unstable:\n%+v\n%+v", e, e2)
		}
	})
}

// Stream entries decode to the same Delivery whichever reply shape carried
// them, whatever their field values, and never panic.
func FuzzDeliveryFields(f *testing.F) {
	f.Add("msg-1", "executor_1", "orch_1", "1763892000123456789", []byte("{}"), 2)
	f.Add("", "", "", "not a number", []byte{0, 0xff}, -9)
	f.Add("m", "s", "r", "-9223372036854775808", []byte(nil), 1<<20)
	f.Fuzz(func(t *testing.T, mid, from, to, at string, body []byte, prio int) {
		pairs := []any{fieldMessageID, mid, fieldSender, from, fieldRecipient, to, fieldEnqueued, at, fieldBody, string(body), "extra", "x"}
		values := map[string]any{}
		for i := 0; i < len(pairs); i += 2 {
			values[pairs[i].(string)] = pairs[i+1]
		}
		a := deliveryFromPairs("1-0", prio, pairs)
		b := deliveryFromMap("1-0", prio, values)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("pairs %+v\n  map %+v", a, b)
		}
		if a.Priority < 0 || a.Priority > lowPriority {
			t.Fatalf("priority %d out of range", a.Priority)
		}
		if a.MessageID != mid || a.Sender != from || a.Recipient != to || string(a.Body) != string(body) {
			t.Fatalf("fields changed: %+v", a)
		}
		if ns, err := strconv.ParseInt(at, 10, 64); err == nil && a.EnqueuedAt.UnixNano() != ns {
			t.Fatalf("at %s decoded as %d", at, a.EnqueuedAt.UnixNano())
		}
		// An odd list (a truncated reply) must not panic either.
		_ = deliveryFromPairs("1-0", prio, pairs[:len(pairs)-1])
	})
}
