package mailbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

// newHistoryFunc builds an empty history with o.
type newHistoryFunc func(t *testing.T, o HistoryOptions) History

var historyBehaviours = []struct {
	name string
	run  func(t *testing.T, newH newHistoryFunc)
}{
	{"append list order", historyOrder},
	{"both keys indexed", historyKeys},
	{"limit", historyLimit},
	{"max per thread", historyMaxPerThread},
	{"bad input", historyBadInput},
	{"envelope bytes exact", historyEnvelopeExact},
	{"stored entries immutable", historyImmutable},
	{"concurrent appends", historyConcurrent},
	{"seen", historySeen},
	{"retract", historyRetract},
	{"duplicate refused by the append", historyDuplicate},
	{"duplicate race: exactly one", historyDuplicateRace},
	{"one message, several entries", historyBatch},
	{"suspension", historySuspension},
}

func runHistoryBehaviours(t *testing.T, newH newHistoryFunc) {
	t.Helper()
	for _, b := range historyBehaviours {
		t.Run(b.name, func(t *testing.T) { b.run(t, newH) })
	}
}

func TestMemoryHistory(t *testing.T) {
	runHistoryBehaviours(t, func(_ *testing.T, o HistoryOptions) History { return NewMemoryHistory(o) })
}

// entry is a full history entry; At is UTC so that it compares equal
// after a JSON round trip.
func entry(id, wf, corr string) Entry {
	return Entry{
		MessageID: id, Type: "notification", Format: "acl", Sender: "executor_1",
		Recipients: []string{"orch_1", "planner_1"}, Broadcast: true, Action: "task_completed",
		WorkflowID: wf, CorrelationID: corr, InReplyTo: "msg_000", Origin: "agent",
		At:            time.Date(2025, 11, 23, 10, 0, 0, 123456789, time.UTC),
		PayloadSHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		Envelope:      json.RawMessage(`{"message_id":"` + id + `","payload":{"n":1}}`),
	}
}

func mustAppend(t *testing.T, h History, e Entry) {
	t.Helper()
	if err := h.Append(t.Context(), e); err != nil {
		t.Fatalf("append %s: %v", e.MessageID, err)
	}
}

func mustList(t *testing.T, h History, kind, id string, limit int) []Entry {
	t.Helper()
	got, err := h.List(t.Context(), kind, id, limit)
	if err != nil {
		t.Fatalf("list %s %s: %v", kind, id, err)
	}
	if got == nil {
		t.Fatalf("list %s %s: nil slice, want non-nil (it is marshalled as [])", kind, id)
	}
	return got
}

func messageIDs(es []Entry) []string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.MessageID
	}
	return ids
}

func historyOrder(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{})
	var want []Entry
	for i := range 5 {
		e := entry(fmt.Sprint("m", i), "wf-1", "")
		mustAppend(t, h, e)
		want = append(want, e)
	}
	mustAppend(t, h, entry("other", "wf-2", ""))
	got := mustList(t, h, KeyWorkflow, "wf-1", 0)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("list wf-1:\n got %+v\nwant %+v", got, want)
	}
	if ids := messageIDs(mustList(t, h, KeyWorkflow, "wf-2", 0)); fmt.Sprint(ids) != "[other]" {
		t.Fatalf("list wf-2 = %v", ids)
	}
}

func historyKeys(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{})
	mustAppend(t, h, entry("both", "W", "C"))
	mustAppend(t, h, entry("wf-only", "W", ""))
	mustAppend(t, h, entry("corr-only", "", "C"))
	mustAppend(t, h, entry("neither", "", "")) // indexed nowhere, not an error
	tests := []struct {
		kind, id string
		want     string
	}{
		{KeyWorkflow, "W", "[both wf-only]"},
		{KeyCorrelation, "C", "[both corr-only]"},
		{KeyWorkflow, "C", "[]"},
		{KeyCorrelation, "W", "[]"},
		{KeyWorkflow, "", "[]"},
		{KeyWorkflow, "unknown", "[]"},
	}
	for _, tc := range tests {
		if got := fmt.Sprint(messageIDs(mustList(t, h, tc.kind, tc.id, 0))); got != tc.want {
			t.Errorf("list %s %q = %s, want %s", tc.kind, tc.id, got, tc.want)
		}
	}
}

func historyLimit(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{})
	for i := range 5 {
		mustAppend(t, h, entry(fmt.Sprint(i), "W", ""))
	}
	tests := []struct {
		limit int
		want  string
	}{{-1, "[0 1 2 3 4]"}, {0, "[0 1 2 3 4]"}, {1, "[0]"}, {2, "[0 1]"}, {5, "[0 1 2 3 4]"}, {99, "[0 1 2 3 4]"}}
	for _, tc := range tests {
		if got := fmt.Sprint(messageIDs(mustList(t, h, KeyWorkflow, "W", tc.limit))); got != tc.want {
			t.Errorf("limit %d: %s, want %s", tc.limit, got, tc.want)
		}
	}
}

func historyMaxPerThread(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{MaxPerThread: 2})
	mustAppend(t, h, entry("1", "W", ""))
	mustAppend(t, h, entry("2", "W", ""))
	if err := h.Append(t.Context(), entry("3", "W", "")); !errors.Is(err, ErrFull) {
		t.Fatalf("third append: %v, want ErrFull", err)
	}
	// Full workflow thread: the entry goes into neither thread.
	if err := h.Append(t.Context(), entry("4", "W", "C")); !errors.Is(err, ErrFull) {
		t.Fatalf("append to full W and empty C: %v, want ErrFull", err)
	}
	if got := messageIDs(mustList(t, h, KeyCorrelation, "C", 0)); len(got) != 0 {
		t.Fatalf("C holds %v after a refused append", got)
	}
	if got := fmt.Sprint(messageIDs(mustList(t, h, KeyWorkflow, "W", 0))); got != "[1 2]" {
		t.Fatalf("W = %s", got)
	}
	// Other threads are unaffected.
	mustAppend(t, h, entry("5", "W2", "C"))
	mustAppend(t, h, entry("6", "W3", "C"))
	// Full correlation thread, empty workflow thread: neither gets it.
	if err := h.Append(t.Context(), entry("7", "W4", "C")); !errors.Is(err, ErrFull) {
		t.Fatalf("append to empty W4 and full C: %v, want ErrFull", err)
	}
	if got := messageIDs(mustList(t, h, KeyWorkflow, "W4", 0)); len(got) != 0 {
		t.Fatalf("W4 holds %v after a refused append", got)
	}
}

func historyBadInput(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{})
	for _, kind := range []string{"", "Workflow", "message", "workflow "} {
		if _, err := h.List(t.Context(), kind, "W", 0); !errors.Is(err, errUnknownKind) {
			t.Errorf("list kind %q: %v, want errUnknownKind", kind, err)
		}
	}
	for _, env := range []string{`{"a":`, `not json`, "{}\x00", `{"a":1}{"b":2}`} {
		e := entry("bad", "W", "")
		e.Envelope = json.RawMessage(env)
		if err := h.Append(t.Context(), e); err == nil {
			t.Errorf("append with envelope %q succeeded", env)
		}
	}
	if got := mustList(t, h, KeyWorkflow, "W", 0); len(got) != 0 {
		t.Fatalf("refused appends left %v", messageIDs(got))
	}
	// No envelope at all is allowed and lists as none.
	e := entry("no-envelope", "W", "")
	e.Envelope = nil
	mustAppend(t, h, e)
	if got := mustList(t, h, KeyWorkflow, "W", 0); len(got) != 1 || got[0].Envelope != nil {
		t.Fatalf("list = %+v, want one entry with nil envelope", got)
	}
	// A zero At is stamped with the append time.
	before := time.Now()
	e = entry("no-time", "W0", "")
	e.At = time.Time{}
	mustAppend(t, h, e)
	got := mustList(t, h, KeyWorkflow, "W0", 0)
	if at := got[0].At; at.Before(before.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Fatalf("zero At stored as %v", at)
	}
}

// envelopeSamples must come back byte for byte: whitespace, HTML
// characters, escapes, key order and big numbers are all kept.
var envelopeSamples = []string{
	`{"message_id":"m1","payload":{"b":2,"a":1}}`,
	"{\n  \"message_id\": \"m2\",\n  \"payload\": {\"html\": \"<b>&amp;</b>\"}\n}\n",
	`{"big":123456789012345678901234567890,"f":1.50,"e":1E+2,"u":"\u00e9\u2028","s":"é"}`,
	`[1,2,3]`,
	`"just a string"`,
	"\t{ }\r\n",
}

func historyEnvelopeExact(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{})
	for i, s := range envelopeSamples {
		e := entry(fmt.Sprint(i), "W", "")
		e.Envelope = json.RawMessage(s)
		mustAppend(t, h, e)
	}
	got := mustList(t, h, KeyWorkflow, "W", 0)
	if len(got) != len(envelopeSamples) {
		t.Fatalf("listed %d, want %d", len(got), len(envelopeSamples))
	}
	for i, s := range envelopeSamples {
		if string(got[i].Envelope) != s {
			t.Errorf("envelope %d = %q, want %q", i, got[i].Envelope, s)
		}
	}
}

func historyImmutable(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{})
	e := entry("m", "W", "C")
	mustAppend(t, h, e)
	e.Envelope[2] = 'X'
	e.Recipients[0] = "mallory"
	got := mustList(t, h, KeyWorkflow, "W", 0)
	got[0].Envelope[2] = 'Y'
	got[0].Recipients[1] = "eve"
	for _, kind := range []string{KeyWorkflow, KeyCorrelation} {
		again := mustList(t, h, kind, map[string]string{KeyWorkflow: "W", KeyCorrelation: "C"}[kind], 0)
		if want := entry("m", "W", "C"); !reflect.DeepEqual(again[0], want) {
			t.Errorf("%s thread changed: %+v", kind, again[0])
		}
	}
}

func historyConcurrent(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{})
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := h.Append(t.Context(), entry(fmt.Sprint(w, "-", i), "W", fmt.Sprint("C", w))); err != nil {
					t.Error(err)
					return
				}
				if _, err := h.List(t.Context(), KeyWorkflow, "W", 10); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := len(mustList(t, h, KeyWorkflow, "W", 0)); n != writers*each {
		t.Fatalf("W holds %d, want %d", n, writers*each)
	}
	// Each writer's entries keep their order.
	got := messageIDs(mustList(t, h, KeyCorrelation, "C3", 0))
	for i, id := range got {
		if id != fmt.Sprint(3, "-", i) {
			t.Fatalf("C3[%d] = %s", i, id)
		}
	}
}

// fakeClock is a settable clock for MemoryHistory retention.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestMemoryHistoryRetention(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := NewMemoryHistory(HistoryOptions{Retention: time.Hour})
	h.now = clock.now
	count := func(kind, id string) int { return len(mustList(t, h, kind, id, 0)) }

	mustAppend(t, h, entry("1", "W", "C"))
	clock.advance(59 * time.Minute)
	mustAppend(t, h, entry("2", "W", "")) // W's last append is now; C's is 59 minutes ago
	clock.advance(time.Minute - time.Nanosecond)
	if w, c := count(KeyWorkflow, "W"), count(KeyCorrelation, "C"); w != 2 || c != 1 {
		t.Fatalf("just before C expires: W %d C %d, want 2 1", w, c)
	}
	clock.advance(time.Nanosecond)
	if w, c := count(KeyWorkflow, "W"), count(KeyCorrelation, "C"); w != 2 || c != 0 {
		t.Fatalf("when C expires: W %d C %d, want 2 0", w, c)
	}
	clock.advance(59 * time.Minute)
	if w := count(KeyWorkflow, "W"); w != 0 {
		t.Fatalf("an hour after its last append W holds %d", w)
	}
	// An expired thread starts afresh, also against MaxPerThread.
	mustAppend(t, h, entry("3", "W", ""))
	if got := fmt.Sprint(messageIDs(mustList(t, h, KeyWorkflow, "W", 0))); got != "[3]" {
		t.Fatalf("W after expiry = %s", got)
	}

	// Threads nobody touches again are swept by a later Append.
	for i := range 100 {
		mustAppend(t, h, entry("x", fmt.Sprint("old-", i), ""))
	}
	clock.advance(2 * time.Hour)
	mustAppend(t, h, entry("new", "fresh", ""))
	h.mu.Lock()
	n := len(h.threads)
	h.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d threads kept after the sweep, want 1", n)
	}
}

func TestMemoryHistoryDefaults(t *testing.T) {
	h := NewMemoryHistory(HistoryOptions{Retention: -1, MaxPerThread: -5})
	if h.opt.Retention != 7*24*time.Hour || h.opt.MaxPerThread != 10000 {
		t.Fatalf("defaults %+v", h.opt)
	}
}

// The JSON form of an Entry (the GET /relay/messages answer) has the field
// names of the fixture and keeps a compact envelope byte for byte.
func TestEntryJSON(t *testing.T) {
	e := entry("msg_004", "wf_abc", "corr-5678")
	e.Envelope = json.RawMessage(`{"z":1,"a":{"big":123456789012345678901234567890,"u":"\u00e9"},"m":[true,null,1.50]}`)
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "entry.json")
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, bytes.TrimSpace(want)) {
		t.Fatalf("marshalled\n%s\nwant (%s)\n%s", b, golden, want)
	}
	var back Entry
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, e) {
		t.Fatalf("round trip\n got %+v\nwant %+v", back, e)
	}
	if !bytes.Equal(back.Envelope, e.Envelope) {
		t.Fatalf("envelope %s, want %s", back.Envelope, e.Envelope)
	}
	// omitempty fields disappear; the others stay.
	b, err = json.Marshal(Entry{MessageID: "m"})
	if err != nil {
		t.Fatal(err)
	}
	const min = `{"message_id":"m","message_type":"","format":"","sender":"","recipients":null,"origin":"","at":"0001-01-01T00:00:00Z","payload_sha256":"","envelope":null}`
	if string(b) != min {
		t.Fatalf("empty entry %s, want %s", b, min)
	}
}

// The stored form keeps every field and the envelope verbatim.
func TestEntryCodec(t *testing.T) {
	for i, s := range append(envelopeSamples, "") {
		e := entry(fmt.Sprint(i), "W\nX", "C")
		e.Envelope = nil
		if s != "" {
			e.Envelope = json.RawMessage(s)
		}
		b, err := encodeEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeEntry(b)
		if err != nil {
			t.Fatalf("decode %q: %v", b, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("sample %d:\n got %+v\nwant %+v", i, got, e)
		}
	}
	for _, bad := range []string{"", "{}", `{"message_id":1}` + "\n{}", "nope\n{}"} {
		if _, err := decodeEntry([]byte(bad)); err == nil {
			t.Errorf("decode %q succeeded", bad)
		}
	}
}

// historySeen: a message is seen in each thread it was appended to, per
// sender, and nowhere else.
func historySeen(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{})
	ctx := t.Context()
	mustAppend(t, h, entry("m1", "wf1", "c1"))
	tests := []struct {
		kind, id, sender, msg string
		want                  bool
	}{
		{KeyWorkflow, "wf1", "executor_1", "m1", true},
		{KeyCorrelation, "c1", "executor_1", "m1", true},
		{KeyWorkflow, "wf1", "orch_1", "m1", false},
		{KeyWorkflow, "wf1", "executor_1", "m2", false},
		{KeyWorkflow, "wf2", "executor_1", "m1", false},
		{KeyWorkflow, "c1", "executor_1", "m1", false},
	}
	for _, tc := range tests {
		got, err := h.Seen(ctx, tc.kind, tc.id, tc.sender, tc.msg)
		if err != nil || got != tc.want {
			t.Errorf("Seen(%s %s %s %s) = %v %v, want %v", tc.kind, tc.id, tc.sender, tc.msg, got, err, tc.want)
		}
	}
	if _, err := h.Seen(ctx, "nope", "wf1", "executor_1", "m1"); err == nil {
		t.Error("unknown kind accepted")
	}
}

// historyRetract: a message refused after its append (the audit trail or
// the queue could not take it) leaves its threads and Seen, so its sender
// may send it again; the other entries stay as they were.
func historyRetract(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{})
	ctx := t.Context()
	first, refused := entry("m1", "wf1", "c1"), entry("m2", "wf1", "c1")
	mustAppend(t, h, first)
	mustAppend(t, h, refused)
	if err := h.Retract(ctx, refused); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][2]string{{KeyWorkflow, "wf1"}, {KeyCorrelation, "c1"}} {
		if got := messageIDs(mustList(t, h, k[0], k[1], 0)); !reflect.DeepEqual(got, []string{"m1"}) {
			t.Errorf("%s %s lists %v after the retraction, want [m1]", k[0], k[1], got)
		}
		for id, want := range map[string]bool{"m1": true, "m2": false} {
			if seen, err := h.Seen(ctx, k[0], k[1], "executor_1", id); err != nil || seen != want {
				t.Errorf("Seen(%s %s %s) = %v %v, want %v", k[0], k[1], id, seen, err, want)
			}
		}
	}
	// Sent again, it is appended again; retracting what is not there is no
	// error.
	mustAppend(t, h, refused)
	if got := messageIDs(mustList(t, h, KeyWorkflow, "wf1", 0)); !reflect.DeepEqual(got, []string{"m1", "m2"}) {
		t.Errorf("after the retry: %v", got)
	}
	if err := h.Retract(ctx, entry("m9", "wf9", "")); err != nil {
		t.Errorf("retracting an unknown entry: %v", err)
	}
}
