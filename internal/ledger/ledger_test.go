package ledger

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/testredis"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Two replicas' recorders on one Redis: their counts add up per day, per
// agent and per team, each flush within the Cluster's slot rule; the
// counts not flushed yet are read too.
func TestRedisReplicasAddUp(t *testing.T) {
	srv := testredis.Start(t)
	var recs []*Recorder
	for range 2 {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		c.AddHook(testredis.SlotCheck(t))
		t.Cleanup(func() { _ = c.Close() })
		recs = append(recs, NewRecorder(NewRedisStore(c, "t:"+t.Name()+":"), quiet))
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() { recs[i%2].Add("a"+string(rune('1'+i%2)), "ds", Counts{Requests: 1, Tokens: 10, MicroUSD: 7}) })
	}
	wg.Wait()
	if err := recs[0].Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs[1].Add("solo", "", Counts{Requests: 1})
	got, err := recs[1].Read(t.Context()) // recs[1] has not flushed: its own counts are read from memory
	if err != nil {
		t.Fatal(err)
	}
	ds := got[TeamPrefix+"ds"]
	if ds == nil || ds.Total != (Counts{Requests: 100, Tokens: 1000, MicroUSD: 700}) {
		t.Fatalf("team ds %+v", ds)
	}
	if a1 := got[AgentPrefix+"a1"]; a1 == nil || a1.Total.Requests != 50 || len(a1.Days) != Days || a1.Days[Days-1].Requests != 50 || a1.Days[Days-1].Day != Day(time.Now()) {
		t.Errorf("agent a1 %+v", a1)
	}
	if s := got[AgentPrefix+"solo"]; s == nil || s.Total.Requests != 1 || got[TeamPrefix+""] != nil {
		t.Errorf("solo %+v, and no team \"\"", s)
	}
}

// The file store survives a restart, and a flush the store refused is
// kept for the next.
func TestFileStoreSurvivesRestartAndFailures(t *testing.T) {
	dir := t.TempDir()
	fs, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	flaky := &failing{Store: fs, fail: true}
	r := NewRecorder(flaky, quiet)
	r.Add("a1", "ds", Counts{Requests: 1, Tokens: 5})
	if err := r.Flush(t.Context()); err == nil {
		t.Fatal("flush into a failing store succeeded")
	}
	flaky.fail = false
	r.Add("a1", "ds", Counts{Requests: 1, Tokens: 5})
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	again, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewRecorder(again, quiet).Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ds := got[TeamPrefix+"ds"]; ds == nil || ds.Total != (Counts{Requests: 2, Tokens: 10}) {
		t.Errorf("after a restart: team ds %+v, want both requests", ds)
	}
}

// A Recorder's Run flushes when its context ends.
func TestRunFlushesAtTheEnd(t *testing.T) {
	fs, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(fs, quiet)
	r.Add("a1", "", Counts{Requests: 3})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx, time.Hour); close(done) }()
	cancel()
	<-done
	got, _ := fs.Read(t.Context(), []string{Day(time.Now())})
	if got[Day(time.Now())][AgentPrefix+"a1"].Requests != 3 {
		t.Errorf("stored %+v", got)
	}
}

type failing struct {
	Store
	fail bool
}

func (f *failing) Add(ctx context.Context, day string, c map[string]Counts) error {
	if f.fail {
		return errors.New("store down")
	}
	return f.Store.Add(ctx, day, c)
}
