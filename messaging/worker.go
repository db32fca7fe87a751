package messaging

import (
	"context"
	"errors"
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
// outcome. It acknowledges the queue entry once the outcome is recorded.
func (s *Service) deliver(ctx context.Context, d mailbox.Delivery) {
	start := s.now()
	e, ok, _ := s.reg.Lookup(ctx, d.Recipient)
	var (
		attempts int
		err      error
	)
	if !ok || e.Endpoint == "" {
		err = errors.New("the recipient no longer has an endpoint")
	} else {
		_, attempts, err = s.handOver(ctx, e.Endpoint, d.Sender, "", d.Body, s.conf.Load().cfg.Gateway.Messaging.Timeout.D())
	}
	if ctx.Err() != nil {
		return // shutting down: leave it for another consumer
	}
	latency := s.now().Sub(start)
	if err == nil {
		sum := map[string]any{"message_id": d.MessageID, "recipient": d.Recipient, "status": "delivered", "attempts": attempts,
			"latency_ms": latency.Milliseconds(), "queued_ms": start.Sub(d.EnqueuedAt).Milliseconds(), "priority": d.Priority, "reclaimed": d.Reclaimed}
		if aerr := s.audit.Write(ctx, audit.Record{Kind: KindMessageDelivery, AgentID: d.Sender, RequestID: d.MessageID, PayloadSHA256: sha256Hex(d.Body), Summary: sum}); aerr != nil {
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
		s.ack(ctx, d)
		return
	}
	reason := "The gateway could not deliver " + d.MessageID + " to " + d.Recipient + "."
	if _, _, rerr := s.deliveryError(ctx, m, d.Body, d.Recipient, "DELIVERY_FAILED", reason, err, attempts, latency); rerr != nil {
		s.log.Error("delivery failure not recorded: it will be retried", "message_id", d.MessageID, "error", rerr.Error())
		return
	}
	s.ack(ctx, d)
}

func (s *Service) ack(ctx context.Context, d mailbox.Delivery) {
	if err := s.queue.Ack(ctx, d); err != nil {
		s.log.Error("queue ack failed: the message may be delivered again", "message_id", d.MessageID, "error", err.Error())
	}
}
