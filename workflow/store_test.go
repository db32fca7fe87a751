package workflow

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/testredis"
)

// storeCase is one Store implementation under test; open returns an empty
// store of its own.
type storeCase struct {
	name string
	open func(t *testing.T) Store
}

// stores are the implementations every Store test runs against. The Redis
// one starts a redis-server per subtest (skipped, loudly, without one).
func stores(t *testing.T) []storeCase {
	t.Helper()
	return []storeCase{
		{"memory", func(*testing.T) Store { return NewMemoryStore() }},
		{"redis", func(t *testing.T) Store {
			srv := testredis.Start(t)
			return NewRedisStore(srv.Client(t), "", 0)
		}},
	}
}

// forEachStore runs test against each implementation, in its own subtest.
func forEachStore(t *testing.T, test func(t *testing.T, s Store)) {
	for _, sc := range stores(t) {
		t.Run(sc.name, func(t *testing.T) {
			test(t, sc.open(t))
		})
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sampleRun is a run with every field set. Values in maps are what JSON
// decodes to (float64, []any, map[string]any), so that a stored copy is
// deep-equal. Its times are in a non-UTC zone and carry a monotonic
// reading, which a stored copy loses: compare them with Equal.
func sampleRun(id string, st Status) *Run {
	zone := time.FixedZone("CEST", 2*3600)
	t0 := time.Now().In(zone)
	t1 := t0.Add(1500 * time.Millisecond)
	return &Run{
		View: View{
			ID:       id,
			Workflow: "claims",
			Status:   st,
			Current:  "triage",
			Steps: []Step{{
				Node: "triage", Agent: "triager", Attempt: 1, Status: "success", Input: "look at C-1",
				Answer: &Answer{Thought: "t", Status: "success", Data: map[string]any{"ok": true, "n": 2.0}, Message: "done", NextStepHint: "pay"},
				Next:   "pay", RequestID: "req-1", StartedAt: t0, EndedAt: t1,
			}},
			Context: Context{
				WorkflowID: id, Status: st, CurrentAgent: "triager",
				Entities:  map[string]any{"claim": map[string]any{"id": "C-1"}},
				History:   []HistoryEntry{{Agent: "triager", Node: "triage", Action: "success", Timestamp: t1}},
				Artifacts: []Artifact{{Type: "pdf", URL: "s3://b/k", Node: "triage"}},
			},
			Path:         []string{"triage", "pay"},
			Error:        "none",
			EscalationID: "esc-1",
			ReviewURL:    "https://gw/review/esc-1",
			CreatedAt:    t0,
			UpdatedAt:    t1,
			EndedAt:      t1.Add(time.Second),
		},
		Caller:       "agent-1",
		Input:        map[string]any{"claim": "C-1", "amount": 12.5, "tags": []any{"a", "b"}},
		Outputs:      map[string]*Answer{"triage": {Status: "success", Data: map[string]any{"x": "y"}, Message: "m"}},
		Note:         "retry with more detail",
		Negotiations: 3,
	}
}

// equalRuns fails t unless got and want hold the same values: times
// compared with Equal, everything else deep-equal.
func equalRuns(t *testing.T, got, want *Run) {
	t.Helper()
	gt, g := splitTimes(got)
	wt, w := splitTimes(want)
	if !slices.EqualFunc(gt, wt, time.Time.Equal) {
		t.Errorf("times = %v\nwant %v", gt, wt)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("run = %+v\nwant %+v", g, w)
	}
}

// splitTimes returns r's times, and a copy of r with them zeroed (sharing
// everything else with r).
func splitTimes(r *Run) ([]time.Time, Run) {
	c := *r
	ts := []time.Time{c.CreatedAt, c.UpdatedAt, c.EndedAt}
	c.CreatedAt, c.UpdatedAt, c.EndedAt = time.Time{}, time.Time{}, time.Time{}
	c.Steps = slices.Clone(c.Steps)
	for i := range c.Steps {
		ts = append(ts, c.Steps[i].StartedAt, c.Steps[i].EndedAt)
		c.Steps[i].StartedAt, c.Steps[i].EndedAt = time.Time{}, time.Time{}
	}
	c.Context.History = slices.Clone(c.Context.History)
	for i := range c.Context.History {
		ts = append(ts, c.Context.History[i].Timestamp)
		c.Context.History[i].Timestamp = time.Time{}
	}
	return ts, c
}

func TestStoreRoundTrip(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		want := sampleRun("r1", InProgress)
		if err := s.Create(ctx, want); err != nil {
			t.Fatalf("Create: %v", err)
		}
		got, err := s.Get(ctx, "r1")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		equalRuns(t, got, want)

		// Get returns a copy: changing it changes nothing stored.
		got.Status = Failed
		got.Path[0] = "changed"
		got.Input["claim"] = "changed"
		again, err := s.Get(ctx, "r1")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		equalRuns(t, again, want)
	})
}

func TestStoreGetMissing(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		if _, err := s.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of a missing run: %v, want ErrNotFound", err)
		}
		_, err := s.Update(ctx, "nope", func(*Run) error { t.Error("fn called for a missing run"); return nil })
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("Update of a missing run: %v, want ErrNotFound", err)
		}
	})
}

func TestStoreCreateDuplicate(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		if err := s.Create(ctx, sampleRun("r1", InProgress)); err != nil {
			t.Fatalf("Create: %v", err)
		}
		dup := sampleRun("r1", Completed)
		dup.Workflow = "other"
		if err := s.Create(ctx, dup); err == nil {
			t.Fatal("second Create of the same id succeeded")
		}
		got, err := s.Get(ctx, "r1")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got.Workflow != "claims" || got.Status != InProgress {
			t.Fatalf("duplicate Create overwrote the run: workflow %q status %s", got.Workflow, got.Status)
		}
		live, err := s.Live(ctx)
		if err != nil {
			t.Fatalf("Live: %v", err)
		}
		if !slices.Equal(live, []string{"r1"}) {
			t.Fatalf("Live = %v after a refused duplicate, want [r1]", live)
		}
	})
}

func TestStoreUpdate(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		orig := sampleRun("r1", InProgress)
		if err := s.Create(ctx, orig); err != nil {
			t.Fatalf("Create: %v", err)
		}
		later := orig.UpdatedAt.Add(time.Minute)
		got, err := s.Update(ctx, "r1", func(r *Run) error {
			r.Current = "pay"
			r.Path = append(r.Path, "pay")
			r.Negotiations++
			r.UpdatedAt = later
			return nil
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		want := sampleRun("r1", InProgress)
		want.CreatedAt, want.EndedAt = orig.CreatedAt, orig.EndedAt
		want.Steps[0].StartedAt, want.Steps[0].EndedAt = orig.Steps[0].StartedAt, orig.Steps[0].EndedAt
		want.Context.History[0].Timestamp = orig.Context.History[0].Timestamp
		want.Current, want.Path, want.Negotiations, want.UpdatedAt = "pay", []string{"triage", "pay", "pay"}, 4, later
		equalRuns(t, got, want)
		stored, err := s.Get(ctx, "r1")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		equalRuns(t, stored, want)
	})
}

func TestStoreUpdateFnError(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		want := sampleRun("r1", InProgress)
		if err := s.Create(ctx, want); err != nil {
			t.Fatalf("Create: %v", err)
		}
		sentinel := errors.New("not now")
		got, err := s.Update(ctx, "r1", func(r *Run) error {
			r.Status = Completed
			r.Negotiations = 99
			return sentinel
		})
		if !errors.Is(err, sentinel) {
			t.Fatalf("Update error = %v, want the fn's error", err)
		}
		if errors.Is(err, apierror.ErrStateUnavailable) {
			t.Fatalf("fn's error marked state unavailable: %v", err)
		}
		if got != nil {
			t.Fatalf("Update returned a run with an error: %+v", got)
		}
		stored, err := s.Get(ctx, "r1")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		equalRuns(t, stored, want)
		live, err := s.Live(ctx)
		if err != nil {
			t.Fatalf("Live: %v", err)
		}
		if !slices.Equal(live, []string{"r1"}) {
			t.Fatalf("Live = %v, want [r1]", live)
		}
	})
}

func TestStoreConcurrentUpdates(t *testing.T) {
	const workers, each = 8, 25
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		r := sampleRun("r1", InProgress)
		r.Negotiations = 0
		if err := s.Create(ctx, r); err != nil {
			t.Fatalf("Create: %v", err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for range workers {
			wg.Go(func() {
				for range each {
					if _, err := s.Update(ctx, "r1", func(r *Run) error {
						r.Negotiations++
						return nil
					}); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("Update: %v", err)
		}
		got, err := s.Get(ctx, "r1")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got.Negotiations != workers*each {
			t.Fatalf("Negotiations = %d, want %d (lost updates)", got.Negotiations, workers*each)
		}
	})
}

func TestStoreLive(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		live := func(want ...string) {
			t.Helper()
			got, err := s.Live(ctx)
			if err != nil {
				t.Fatalf("Live: %v", err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Live = %v, want %v", got, want)
			}
		}
		live()
		for id, st := range map[string]Status{"d": InProgress, "a": InProgress, "b": WaitingForHuman, "c": Completed} {
			if err := s.Create(ctx, sampleRun(id, st)); err != nil {
				t.Fatalf("Create %s: %v", id, err)
			}
		}
		live("a", "d")

		setStatus := func(id string, st Status) {
			t.Helper()
			if _, err := s.Update(ctx, id, func(r *Run) error { r.Status = st; return nil }); err != nil {
				t.Fatalf("Update %s: %v", id, err)
			}
		}
		setStatus("a", Completed)
		live("d")
		setStatus("b", InProgress)
		live("b", "d")
		setStatus("d", WaitingForHuman)
		live("b")
		setStatus("d", InProgress)
		live("b", "d")
	})
}

func TestStoreLease(t *testing.T) {
	const ttl = 200 * time.Millisecond
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		lease := func(owner string, want bool) {
			t.Helper()
			got, err := s.Lease(ctx, "r1", owner, ttl)
			if err != nil {
				t.Fatalf("Lease(%s): %v", owner, err)
			}
			if got != want {
				t.Fatalf("Lease(%s) = %v, want %v", owner, got, want)
			}
		}
		lease("a", true)
		lease("b", false)
		// a renews, more than once, past the first ttl: b still waits.
		for range 3 {
			time.Sleep(ttl / 2)
			lease("a", true)
			lease("b", false)
		}
		// a stops renewing: once the ttl passes, b takes over.
		time.Sleep(ttl + 100*time.Millisecond)
		lease("b", true)
		lease("a", false)

		// A non-owner's release does nothing.
		if err := s.Release(ctx, "r1", "a"); err != nil {
			t.Fatalf("Release by a non-owner: %v", err)
		}
		lease("a", false)
		// The owner's release frees the lease at once.
		if err := s.Release(ctx, "r1", "b"); err != nil {
			t.Fatalf("Release by the owner: %v", err)
		}
		lease("a", true)
		// Releasing a lease nobody holds is fine.
		if err := s.Release(ctx, "other", "a"); err != nil {
			t.Fatalf("Release of a free lease: %v", err)
		}
	})
}

// redisFixture is a RedisStore on its own server, with a client to look
// at the keys.
func redisFixture(t *testing.T, timeout time.Duration) (*RedisStore, *redis.Client, *testredis.Server) {
	t.Helper()
	srv := testredis.Start(t)
	c := srv.Client(t)
	return NewRedisStore(c, "", timeout), c, srv
}

func TestRedisStoreRetention(t *testing.T) {
	s, c, _ := redisFixture(t, 0)
	ctx := testCtx(t)
	ttl := func(id string) time.Duration {
		t.Helper()
		if n, err := c.Exists(ctx, "{gw}:workflow:run:"+id).Result(); err != nil || n != 1 {
			t.Fatalf("key {gw}:workflow:run:%s: exists %d, %v", id, n, err)
		}
		d, err := c.TTL(ctx, "{gw}:workflow:run:"+id).Result()
		if err != nil {
			t.Fatalf("TTL: %v", err)
		}
		return d
	}
	if err := s.Create(ctx, sampleRun("live", InProgress)); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, sampleRun("waiting", WaitingForHuman)); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, sampleRun("done", Completed)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"live", "waiting"} {
		if d := ttl(id); d >= 0 {
			t.Errorf("live run %s has TTL %s, want none", id, d)
		}
	}
	if d := ttl("done"); d <= 0 || d > DefaultRetention {
		t.Errorf("final run has TTL %s, want in (0, %s]", d, DefaultRetention)
	}

	// A run that ends gets the retention as TTL (here a custom one).
	s.Retention = time.Hour
	if _, err := s.Update(ctx, "live", func(r *Run) error { r.Status = Failed; return nil }); err != nil {
		t.Fatal(err)
	}
	if d := ttl("live"); d <= 0 || d > time.Hour {
		t.Errorf("run that failed has TTL %s, want in (0, 1h]", d)
	}
	// Should a final run be stored live again, it loses its TTL.
	if _, err := s.Update(ctx, "done", func(r *Run) error { r.Status = InProgress; return nil }); err != nil {
		t.Fatal(err)
	}
	if d := ttl("done"); d >= 0 {
		t.Errorf("run made live again has TTL %s, want none", d)
	}
	// The keys are where the documentation says.
	if ok, err := c.SIsMember(ctx, "{gw}:workflow:live", "done").Result(); err != nil || !ok {
		t.Errorf("{gw}:workflow:live holds done: %v, %v", ok, err)
	}
	if ok, err := s.Lease(ctx, "done", "me", time.Minute); err != nil || !ok {
		t.Fatalf("Lease: %v, %v", ok, err)
	}
	if v, err := c.Get(ctx, "{gw}:workflow:lease:done").Result(); err != nil || v != "me" {
		t.Errorf("{gw}:workflow:lease:done = %q, %v; want me", v, err)
	}
	if d, err := c.PTTL(ctx, "{gw}:workflow:lease:done").Result(); err != nil || d <= 0 || d > time.Minute {
		t.Errorf("lease PTTL %s, %v; want in (0, 1m]", d, err)
	}
}

func TestRedisStorePrefix(t *testing.T) {
	srv := testredis.Start(t)
	c := srv.Client(t)
	ctx := testCtx(t)
	a, b := NewRedisStore(c, "{env-a}", 0), NewRedisStore(c, "", 0)
	if err := a.Create(ctx, sampleRun("r1", InProgress)); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, "{env-a}:workflow:run:r1").Result(); err != nil || n != 1 {
		t.Fatalf("{env-a}:workflow:run:r1 exists %d, %v", n, err)
	}
	if _, err := b.Get(ctx, "r1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another prefix sees the run: %v", err)
	}
	if ids, err := b.Live(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("another prefix's Live = %v, %v", ids, err)
	}
}

// TestRedisStoreUnavailable: with Redis gone every call fails soon,
// marked ErrStateUnavailable, even when the caller's context has no
// deadline; and the store works again once Redis is back.
func TestRedisStoreUnavailable(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s, _, srv := redisFixture(t, timeout)
	if err := s.Create(t.Context(), sampleRun("r1", InProgress)); err != nil {
		t.Fatal(err)
	}
	srv.Stop()

	calls := map[string]func(ctx context.Context) error{
		"Get": func(ctx context.Context) error { _, err := s.Get(ctx, "r1"); return err },
		"Create": func(ctx context.Context) error {
			return s.Create(ctx, sampleRun("r2", InProgress))
		},
		"Update": func(ctx context.Context) error {
			_, err := s.Update(ctx, "r1", func(*Run) error { return nil })
			return err
		},
		"Lease":   func(ctx context.Context) error { _, err := s.Lease(ctx, "r1", "me", time.Second); return err },
		"Release": func(ctx context.Context) error { return s.Release(ctx, "r1", "me") },
		"Live":    func(ctx context.Context) error { _, err := s.Live(ctx); return err },
	}
	for name, call := range calls {
		start := time.Now()
		err := call(context.Background()) // no deadline of the caller's
		elapsed := time.Since(start)
		if !errors.Is(err, apierror.ErrStateUnavailable) {
			t.Errorf("%s with Redis stopped: %v, want ErrStateUnavailable", name, err)
		}
		if elapsed > timeout+time.Second {
			t.Errorf("%s with Redis stopped took %s, timeout %s", name, elapsed, timeout)
		}
		t.Logf("%s with Redis stopped: %s: %v", name, elapsed.Round(time.Millisecond), err)
	}

	srv.Restart() // empty: nothing is persisted
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := s.Get(t.Context(), "r1")
		if errors.Is(err, ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Get after restart: %v, want ErrNotFound", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisStoreHung: a Redis that accepts and never answers costs a call
// its timeout, not the caller's (absent) deadline, with a client that
// lets contexts bound its reads (ContextTimeoutEnabled, as
// limit.NewRedisClient sets).
func TestRedisStoreHung(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv := testredis.Start(t)
	opt, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	s := NewRedisStore(c, "", timeout)
	if err := s.Create(t.Context(), sampleRun("r1", InProgress)); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	start := time.Now()
	_, err = s.Get(context.Background(), "r1")
	elapsed := time.Since(start)
	if !errors.Is(err, apierror.ErrStateUnavailable) {
		t.Fatalf("Get with Redis hung: %v, want ErrStateUnavailable", err)
	}
	if elapsed > timeout+time.Second {
		t.Fatalf("Get with Redis hung took %s, timeout %s", elapsed, timeout)
	}
}

// TestMemoryStorePrunes: ended runs go after their retention, and the
// oldest ended ones when the store is full; live runs always stay.
func TestMemoryStorePrunes(t *testing.T) {
	s := NewMemoryStore()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	s.Retention, s.MaxRuns = time.Hour, 3
	ctx := testCtx(t)
	add := func(id string, st Status, ended time.Time) {
		if err := s.Create(ctx, &Run{View: View{ID: id, Status: st, EndedAt: ended}}); err != nil {
			t.Fatal(err)
		}
	}
	add("old", Completed, now.Add(-2*time.Hour))
	add("live", InProgress, time.Time{})
	add("a", Failed, now.Add(-30*time.Minute))
	add("b", Completed, now.Add(-10*time.Minute)) // 4 > MaxRuns: prune
	for id, want := range map[string]bool{"old": false, "live": true, "a": true, "b": true} {
		if _, err := s.Get(ctx, id); (err == nil) != want {
			t.Errorf("run %s kept = %v, want %v", id, err == nil, want)
		}
	}
	add("c", Completed, now) // over again: the oldest ended (a) goes, not the live one
	for id, want := range map[string]bool{"live": true, "a": false, "b": true, "c": true} {
		if _, err := s.Get(ctx, id); (err == nil) != want {
			t.Errorf("run %s kept = %v, want %v", id, err == nil, want)
		}
	}
}
