package messaging

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/envelope"
	"github.com/sacpgw/gateway/mailbox"
)

// Run delivers queued messages with messaging.workers workers until ctx
// ends. A delivery in flight when ctx ends is not acknowledged: with the
// Redis queue another replica takes it over; with the memory queue it is
// lost with the process (the memory backend is for one replica and tests).
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range max(1, s.conf.Load().cfg.Gateway.Messaging.Workers) {
		wg.Go(func() { s.work(ctx) })
	}
	wg.Wait()
}

func (s *Service) work(ctx context.Context) {
	for {
		d, err := s.queue.Pop(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Error("message queue unavailable", "error", err.Error())
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		s.deliver(ctx, d)
	}
}

// deliver hands one queued message over, with retries, and records the
// outcome. It acknowledges the queue entry once a delivery is recorded; one
// that failed for good is moved to the queue's dead letters instead (after
// its ERROR and escalation are recorded), where /admin/messages lists it.
// Unrecorded, the entry stays in flight to be handed out again, at most
// MaxDeliveries times in all.
func (s *Service) deliver(ctx context.Context, d mailbox.Delivery) {
	start := s.now()
	if !d.ExpiresAt.IsZero() && start.After(d.ExpiresAt) {
		s.expire(ctx, d, start)
		return
	}
	e, ok, _ := s.reg.Lookup(ctx, d.Recipient)
	var (
		attempts int
		err      error
	)
	if !ok || e.Endpoint == "" {
		err = errRecipientGone
	} else {
		_, attempts, err = s.handOver(ctx, e.Endpoint, d.Sender, "", d.Body, s.conf.Load().cfg.Gateway.Messaging.Timeout.D())
	}
	if ctx.Err() != nil {
		return // shutting down: leave it for another consumer
	}
	latency := s.now().Sub(start)
	if err == nil {
		sum := audit.Members("message_id", d.MessageID, "recipient", d.Recipient, "status", "delivered", "attempts", attempts,
			"latency_ms", latency.Milliseconds(), "queued_ms", start.Sub(d.EnqueuedAt).Milliseconds(), "priority", d.Priority, "reclaimed", d.Reclaimed,
			"delivery_id", d.DeliveryID, "deliveries", d.Deliveries)
		if aerr := s.audit.Write(ctx, audit.Record{Kind: KindMessageDelivery, AgentID: d.Sender, RequestID: d.MessageID, PayloadSHA256: sha256Hex(d.Body), Object: sum}); aerr != nil {
			s.log.Error("delivery not audited: it will be retried", "message_id", d.MessageID, "error", aerr.Error())
			return
		}
		s.stats.delivered.Add(1)
		s.ack(ctx, d)
		return
	}
	s.stats.failed.Add(1)
	m, derr := envelope.Decode(d.Body)
	if derr != nil {
		s.log.Error("undeliverable queued message is not an envelope", "message_id", d.MessageID, "error", derr.Error())
		s.bury(ctx, d, "not_an_envelope: the queued body does not decode as an envelope")
		return
	}
	reason := "The gateway could not deliver " + d.MessageID + " to " + d.Recipient + "."
	if _, _, rerr := s.deliveryError(ctx, m, d.Body, d.Recipient, "DELIVERY_FAILED", reason, err, attempts, latency); rerr != nil {
		s.log.Error("delivery failure not recorded: it will be retried", "message_id", d.MessageID, "error", rerr.Error())
		return
	}
	s.bury(ctx, d, fmt.Sprintf("delivery_failed: %s after %d attempt(s)", failureKind(err), attempts))
}

// expire records a delivery whose metadata.ttl_ms passed before a worker
// got to it, and drops it: the sender said it is not worth making late.
// Unrecorded, it stays in flight and the next worker decides again.
func (s *Service) expire(ctx context.Context, d mailbox.Delivery, now time.Time) {
	sum := audit.Members("message_id", d.MessageID, "recipient", d.Recipient, "status", "expired", "attempts", 0,
		"queued_ms", now.Sub(d.EnqueuedAt).Milliseconds(), "expired_ms", now.Sub(d.ExpiresAt).Milliseconds(), "priority", d.Priority,
		"reclaimed", d.Reclaimed, "delivery_id", d.DeliveryID, "deliveries", d.Deliveries)
	if err := s.audit.Write(ctx, audit.Record{Kind: KindMessageDelivery, AgentID: d.Sender, RequestID: d.MessageID, PayloadSHA256: sha256Hex(d.Body), Object: sum}); err != nil {
		s.log.Error("expiry not audited: it will be decided again", "message_id", d.MessageID, "error", err.Error())
		return
	}
	s.stats.expired.Add(1)
	s.ack(ctx, d)
}

// errRecipientGone: the recipient of a queued delivery left the registry,
// or has no endpoint any more.
var errRecipientGone = errors.New("the recipient no longer has an endpoint")

func (s *Service) ack(ctx context.Context, d mailbox.Delivery) {
	if err := s.queue.Ack(ctx, d); err != nil {
		s.log.Error("queue ack failed: the message may be delivered again", "message_id", d.MessageID, "error", err.Error())
	}
}

// bury moves a delivery that failed for good to the dead letters. reason
// is the gateway's own words: the recipient's never get there.
func (s *Service) bury(ctx context.Context, d mailbox.Delivery, reason string) {
	if err := s.queue.DeadLetter(ctx, d, reason); err != nil {
		s.log.Error("dead letter not recorded: the message may be delivered again", "message_id", d.MessageID, "error", err.Error())
	}
}
