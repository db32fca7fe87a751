package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/internal/scope"
)

// Events: every state change of a request is told to its agent, on
// GET /agent/events (server-sent events) and, when the agent's registry
// entry has a callback_url, by a POST there. Both carry the same JSON:
//
//	{"request_id": "req-…", "state": "APPROVED", "status": "approved", "at": "…"}
//
// status is the latest response's status, null before there is one
// (PENDING, VALIDATING). Delivery is at most once: a stream that was not
// connected, or a callback that kept failing, misses the event; the state
// itself is always in GET /agent/status/{id}.

// Event is one state change of a request.
type Event struct {
	// AgentID is whose request it is: only that agent is told.
	AgentID   string    `json:"agent_id"`
	RequestID string    `json:"request_id"`
	State     State     `json:"state"`
	Status    *string   `json:"status"`
	At        time.Time `json:"at"`
}

// eventData is what an agent is sent of an Event.
type eventData struct {
	RequestID string    `json:"request_id"`
	State     State     `json:"state"`
	Status    *string   `json:"status"`
	At        time.Time `json:"at"`
}

func (ev Event) data() eventData {
	return eventData{RequestID: ev.RequestID, State: ev.State, Status: ev.Status, At: ev.At}
}

// EventBus carries events between replicas. RedisStore is one (pub/sub);
// with a store that is not, events stay in the process, which is all there
// is with one replica.
type EventBus interface {
	// Publish sends ev to every replica's subscription.
	Publish(ctx context.Context, ev Event) error
	// Subscribe calls deliver with every event published from then on, by
	// any replica, until ctx ends; done is closed when it has stopped. It
	// returns once the subscription is in place.
	Subscribe(ctx context.Context, deliver func(Event)) (done <-chan struct{}, err error)
}

// Bounds of the event streams.
const (
	// maxStreamsPerAgent bounds one agent's open streams on a replica: each
	// holds a connection and a goroutine.
	maxStreamsPerAgent = 8
	// streamBuffer is how many events a stream may fall behind before it is
	// cut (the agent reconnects and reads the states it missed).
	streamBuffer = 64
	// maxQueued bounds the events waiting to be published, and each
	// agent's callbacks waiting to be sent.
	maxQueued = 1024
	// callbackAttempts, callbackTimeout and callbackBackoff: a callback is
	// tried a few times, each attempt bounded, with growing pauses.
	callbackAttempts = 3
	callbackTimeout  = 5 * time.Second
	callbackBackoff  = 500 * time.Millisecond
)

// update is store.Update that tells the agent's listeners when the state
// changed.
func (s *Service) update(ctx context.Context, id string, fn func(*Record) error) (*Record, error) {
	var from State
	rec, err := s.store.Update(ctx, id, func(r *Record) error {
		from = r.State
		return fn(r)
	})
	if err == nil && rec.State != from {
		s.changed(rec)
	}
	return rec, err
}

// changed tells rec's agent that rec is in a new state: the streams (on
// every replica, through the bus) and the agent's callback. It never
// blocks: both are queued, in order, and sent in the background.
func (s *Service) changed(rec *Record) {
	ev := Event{AgentID: rec.AgentID, RequestID: rec.ID, State: rec.State, At: rec.UpdatedAt}
	if rec.Response != nil && rec.Response.Status != "" && rec.Response.State == rec.State {
		st := rec.Response.Status
		ev.Status = &st
	}
	if s.bus == nil {
		s.hub.deliver(ev)
	} else {
		s.publishing.push(func() {
			ctx, cancel := context.WithTimeout(context.Background(), callbackTimeout)
			defer cancel()
			if err := s.bus.Publish(ctx, ev); err != nil {
				s.log.Warn("approval event not published", "request_id", ev.RequestID, "state", ev.State, "error", err.Error())
			}
		})
	}
	if a := s.cur().cfg.Agents[rec.AgentID]; a != nil && a.CallbackURL != "" {
		s.callbackQueue(rec.AgentID).push(func() { s.sendCallback(a.CallbackURL, ev) })
	}
}

// queue runs functions one after the other in a goroutine that exists only
// while there is work, so the order of events is kept, a slow receiver
// holds up nobody else's requests, and an idle Service holds no goroutine.
type queue struct {
	mu      sync.Mutex
	items   []func()
	running bool
	wg      *sync.WaitGroup
	onDrop  func()
}

// push queues f; beyond maxQueued it is dropped (and onDrop told).
func (q *queue) push(f func()) {
	q.mu.Lock()
	if len(q.items) >= maxQueued {
		q.mu.Unlock()
		if q.onDrop != nil {
			q.onDrop()
		}
		return
	}
	q.items = append(q.items, f)
	if !q.running {
		q.running = true
		q.wg.Add(1)
		go q.run()
	}
	q.mu.Unlock()
}

func (q *queue) run() {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		f := q.items[0]
		q.items[0] = nil
		q.items = q.items[1:]
		q.mu.Unlock()
		f()
	}
}

// callbackQueue is the agent's queue of callbacks: one per agent, so a
// receiver that is down delays only its own agent's events.
func (s *Service) callbackQueue(agentID string) *queue {
	s.callbacksMu.Lock()
	defer s.callbacksMu.Unlock()
	q := s.callbacks[agentID]
	if q == nil {
		q = &queue{wg: &s.notifying, onDrop: func() {
			s.log.Warn("approval callback dropped: too many queued for the agent", "agent_id", agentID)
		}}
		s.callbacks[agentID] = q
	}
	return q
}

// sendCallback POSTs ev to the agent's callback_url through the service's
// HTTP client (the egress-checked one: the URL is the agent's to choose),
// each attempt bounded by callbackTimeout. A network error, 408, 429 or
// 5xx is retried; other answers, and an address the egress rules refuse,
// are final. Failures are logged without
// the URL, which may carry a credential.
func (s *Service) sendCallback(target string, ev Event) {
	body, err := json.Marshal(ev.data())
	if err != nil {
		s.log.Warn("approval callback", "agent_id", ev.AgentID, "request_id", ev.RequestID, "error", err.Error())
		return
	}
	pause := callbackBackoff
	for attempt := 1; ; attempt++ {
		retry, err := s.postCallback(target, body)
		if err == nil {
			return
		}
		if !retry || attempt >= callbackAttempts {
			s.log.Warn("approval callback failed", "agent_id", ev.AgentID, "request_id", ev.RequestID, "state", ev.State,
				"attempts", attempt, "error", err.Error())
			return
		}
		select {
		case <-s.stop:
			s.log.Warn("approval callback abandoned: shutting down", "agent_id", ev.AgentID, "request_id", ev.RequestID)
			return
		case <-time.After(pause):
		}
		pause *= 2
	}
}

func (s *Service) postCallback(target string, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), callbackTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return false, errors.New("invalid callback_url")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gateway-approval-events")
	res, err := s.client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		// The egress rules refusing the address will refuse it again.
		return !errors.Is(err, egress.ErrDestination), err
	}
	_ = res.Body.Close()
	switch c := res.StatusCode; {
	case c/100 == 2:
		return false, nil
	case c == http.StatusRequestTimeout, c == http.StatusTooManyRequests, c >= 500:
		return true, fmt.Errorf("callback answered %d", c)
	default:
		return false, fmt.Errorf("callback answered %d", c)
	}
}

// hub fans events out to this replica's streams, by agent.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[*subscriber]struct{}
	n    int

	// remote is the subscription to the bus, held while any stream is
	// open (subscribe and unsubscribe serialise on rmu).
	rmu    sync.Mutex
	bus    EventBus
	cancel context.CancelFunc
	done   <-chan struct{}
}

// subscriber is one open stream.
type subscriber struct {
	agent string
	ch    chan Event
	// gone is closed when the stream must end: it fell behind, or the bus
	// subscription ended.
	gone chan struct{}
	once sync.Once
}

func (sub *subscriber) end() { sub.once.Do(func() { close(sub.gone) }) }

var errTooManyStreams = errors.New("too many event streams")

// subscribe opens a stream for agent. With a bus, the first stream on the
// replica subscribes to it (and waits until it is subscribed, so no event
// published after the stream opened is missed).
func (h *hub) subscribe(agent string) (*subscriber, error) {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	h.mu.Lock()
	full := len(h.subs[agent]) >= maxStreamsPerAgent
	h.mu.Unlock()
	if full {
		return nil, errTooManyStreams
	}
	if h.bus != nil && !h.remoteLive() {
		if h.cancel != nil {
			h.cancel() // the one that stopped by itself
		}
		ctx, cancel := context.WithCancel(context.Background())
		done, err := h.bus.Subscribe(ctx, h.deliver)
		if err != nil {
			cancel()
			return nil, err
		}
		h.cancel, h.done = cancel, done
		go h.watch(done)
	}
	sub := &subscriber{agent: agent, ch: make(chan Event, streamBuffer), gone: make(chan struct{})}
	h.mu.Lock()
	if h.subs[agent] == nil {
		h.subs[agent] = map[*subscriber]struct{}{}
	}
	h.subs[agent][sub] = struct{}{}
	h.n++
	h.mu.Unlock()
	return sub, nil
}

// remoteLive reports whether the bus subscription is running; h.rmu held.
func (h *hub) remoteLive() bool {
	if h.cancel == nil {
		return false
	}
	select {
	case <-h.done:
		return false
	default:
		return true
	}
}

// watch ends every stream when the bus subscription stops on its own
// (not because the last stream left): their agents reconnect, which
// subscribes again.
func (h *hub) watch(done <-chan struct{}) {
	<-done
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.subs {
		for sub := range set {
			sub.end()
		}
	}
}

// unsubscribe closes sub's stream; the last one out drops the bus
// subscription.
func (h *hub) unsubscribe(sub *subscriber) {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	h.mu.Lock()
	if set := h.subs[sub.agent]; set != nil {
		if _, ok := set[sub]; ok {
			delete(set, sub)
			h.n--
		}
		if len(set) == 0 {
			delete(h.subs, sub.agent)
		}
	}
	n := h.n
	h.mu.Unlock()
	if n == 0 && h.cancel != nil {
		h.cancel()
		h.cancel, h.done = nil, nil
	}
}

// deliver hands ev to the streams of its agent, never blocking: a stream
// that is streamBuffer events behind is ended instead.
func (h *hub) deliver(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs[ev.AgentID] {
		select {
		case sub.ch <- ev:
		default:
			sub.end()
		}
	}
}

// Events serves GET /agent/events: the caller's requests' state changes as
// server-sent events ("event: state", data as in Event), with a comment
// every keep-alive interval so that proxies and the server's idle write
// bound keep the connection. It ends when the client leaves, the Service
// stops (Run's context), or the stream falls too far behind; an agent
// reconnects then and reads what it missed from /agent/status.
func (s *Service) Events() http.Handler { return endpoint(s.events) }

func (s *Service) events(w http.ResponseWriter, r *http.Request) error {
	ex := scope.Get(r.Context())
	sub, err := s.hub.subscribe(ex.Agent.ID)
	switch {
	case errors.Is(err, errTooManyStreams):
		return &apierror.Error{Status: http.StatusTooManyRequests, Type: apierror.TypeRateLimit, Code: "rate_limit_exceeded",
			Message: fmt.Sprintf("Agent %s has %d event streams open on this replica already; close one first.", ex.Agent.ID, maxStreamsPerAgent)}
	case err != nil:
		s.log.Error("approval events: subscribe", "agent_id", ex.Agent.ID, "error", err.Error())
		return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeServer, Code: "events_unavailable",
			Message: "The event stream is unavailable right now; retry later, and poll /agent/status meanwhile."}
	}
	defer s.hub.unsubscribe(sub)

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	// retry: how long a client waits before reconnecting.
	if _, err := fmt.Fprint(w, "retry: 3000\n: connected\n\n"); err != nil {
		return nil
	}
	if err := rc.Flush(); err != nil {
		s.log.Warn("approval events: the response cannot be flushed; no stream", "error", err.Error())
		return nil
	}
	tick := time.NewTicker(s.keepAlive)
	defer tick.Stop()
	for {
		var msg []byte
		select {
		case <-r.Context().Done():
			return nil
		case <-s.stop:
			return nil
		case <-sub.gone:
			return nil
		case ev := <-sub.ch:
			b, err := json.Marshal(ev.data())
			if err != nil {
				continue
			}
			msg = append(append([]byte("event: state\ndata: "), b...), '\n', '\n')
		case <-tick.C:
			msg = []byte(": keep-alive\n\n")
		}
		if _, err := w.Write(msg); err != nil {
			return nil
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}
