package messaging

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/envelope"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/mailbox"
	"github.com/sacpgw/gateway/messaging/relayconf"
)

func request(t *testing.T, raw string) *envelope.Message {
	t.Helper()
	m, err := envelope.Decode([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	m.Fill(time.Now(), newID)
	return m
}

// TestCheckReply: what a recipient may answer to a REQUEST, in both
// formats; the reply is kept in the request's thread.
func TestCheckReply(t *testing.T) {
	s := &Service{now: time.Now}
	c, _ := newConf(&config.Config{}, nil)
	s.conf.Store(c)
	acl := request(t, `{"message_id":"m1","message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf","action":"plan"}`)
	sam := request(t, `{"message_id":"s1","correlation_id":"c1","sender":{"agent_id":"orch"},"recipient":{"agent_id":"planner"},"message_type":"REQUEST","payload":{"action":"plan"}}`)
	tests := []struct {
		name   string
		req    *envelope.Message
		answer string
		err    string
		check  func(*envelope.Message) bool
	}{
		{"empty body is an ack", acl, "", "", func(m *envelope.Message) bool {
			return m.Type == envelope.Ack && m.InReplyTo == "m1" && m.Sender.ID == "planner" && m.Recipient.ID == "orch" && m.Status == "received"
		}},
		{"SAM ack has no status", sam, "  ", "", func(m *envelope.Message) bool {
			return m.Type == envelope.Ack && m.Status == "" && m.CorrelationID == "c1"
		}},
		{"ack without recipient is addressed to the requester", acl, `{"message_type":"ack","sender_id":"planner","in_reply_to":"m1","status":"received"}`, "", func(m *envelope.Message) bool {
			return m.Recipient != nil && m.Recipient.ID == "orch" && m.WorkflowID == "wf"
		}},
		{"reply moved back into the request's thread", acl, `{"message_type":"response","sender_id":"planner","receiver_id":"orch","in_reply_to":"m1","workflow_id":"wf_other","action":"done"}`, "", func(m *envelope.Message) bool { return m.WorkflowID == "wf" }},
		{"SAM error reply", sam, `{"correlation_id":"c9","sender":{"agent_id":"planner"},"recipient":{"agent_id":"orch"},"message_type":"ERROR","error":{"code":"X","message":"no"}}`, "", func(m *envelope.Message) bool {
			return m.Type == envelope.Error && m.CorrelationID == "c1"
		}},
		{"spoofed sender", acl, `{"message_type":"response","sender_id":"other","receiver_id":"orch","in_reply_to":"m1","action":"done"}`, `claims sender "other"`, nil},
		{"wrong addressee", acl, `{"message_type":"response","sender_id":"planner","receiver_id":"other","in_reply_to":"m1","action":"done"}`, `addressed to "other"`, nil},
		{"other request", acl, `{"message_type":"response","sender_id":"planner","receiver_id":"orch","in_reply_to":"m2","action":"done"}`, `replies to "m2"`, nil},
		{"an event is no answer", acl, `{"message_type":"notification","sender_id":"planner","receiver_id":"orch","action":"done"}`, "not a response", nil},
		{"garbage", acl, `<html>`, "not a valid envelope", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.checkReply(tc.req, "planner", []byte(tc.answer))
			if tc.err != "" {
				var ae *attemptError
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &ae) || ae.retry {
					t.Fatalf("got %v, want a final error containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !tc.check(got) {
				t.Fatalf("got %+v %v", got, err)
			}
			if _, err := got.Marshal(); err != nil {
				t.Errorf("the reply does not encode: %v", err)
			}
		})
	}
}

// TestTimeout: metadata.timeout_ms within messaging.max_timeout, else the
// default.
func TestTimeout(t *testing.T) {
	cfg := &config.Config{Gateway: config.Gateway{Messaging: relayconf.Settings{Timeout: config.Duration(10 * time.Second), MaxTimeout: config.Duration(time.Minute)}}}
	s := &Service{}
	c, _ := newConf(cfg, nil)
	s.conf.Store(c)
	for ms, want := range map[int]time.Duration{0: 10 * time.Second, 250: 250 * time.Millisecond, 3600000: time.Minute} {
		if got := s.timeout(ms); got != want {
			t.Errorf("timeout(%d) = %s, want %s", ms, got, want)
		}
	}
}

// TestAttemptErrors: a timed-out attempt is a deadline error callers can
// recognise, and is not retried within the same deadline.
func TestAttemptErrors(t *testing.T) {
	cfg := &config.Config{Gateway: config.Gateway{Messaging: relayconf.Settings{RetryBackoff: config.Duration(time.Millisecond)}}}
	cfg.Protocol.Limits.MaxRetryAttempts = 3
	s := &Service{client: nil}
	c, _ := newConf(cfg, nil)
	s.conf.Store(c)
	s.client = newTestClient()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, n, err := s.handOver(ctx, "http://127.0.0.1:1/x", "a", "", []byte("{}"), time.Second)
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Errorf("cancelled hand-over: %d attempts, %v", n, err)
	}
	_, n, err = s.handOver(context.Background(), "http://127.0.0.1:1/x", "a", "", []byte("{}"), time.Second)
	var ae *attemptError
	if n != 3 || !errors.As(err, &ae) || !ae.retry {
		t.Errorf("refused connection: %d attempts, %v", n, err)
	}
}

func newTestClient() *http.Client { return &http.Client{Timeout: 2 * time.Second} }

// TestHistoryPages: limit and cursor walk a thread without gaps or
// repeats.
func TestHistoryPages(t *testing.T) {
	entries := make([]mailbox.Entry, 7)
	for i := range entries {
		entries[i].MessageID = "m" + strconv.Itoa(i)
	}
	var got []string
	p := page{limit: 3}
	for pages := 0; ; pages++ {
		l := list(mailbox.KeyWorkflow, "wf", entries, p)
		for _, e := range l.Data {
			got = append(got, e.MessageID)
		}
		if !l.HasMore {
			if pages != 2 || l.NextCursor != "" {
				t.Errorf("%d pages, last cursor %q", pages+1, l.NextCursor)
			}
			break
		}
		n, _ := strconv.Atoi(l.NextCursor)
		p.from = n
	}
	if strings.Join(got, ",") != "m0,m1,m2,m3,m4,m5,m6" {
		t.Errorf("walked %v", got)
	}
	if l := list(mailbox.KeyWorkflow, "wf", entries, page{limit: 3, from: 99}); len(l.Data) != 0 || l.HasMore {
		t.Errorf("cursor past the end: %+v", l)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "cursor=-1", "cursor=x"} {
		r, _ := http.NewRequest(http.MethodGet, "/relay/messages?workflow_id=w&"+q, nil)
		if _, err := pageOf(r); err == nil {
			t.Errorf("%s accepted", q)
		}
	}
}
