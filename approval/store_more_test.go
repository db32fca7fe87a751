package approval

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

// The approved index: ApprovedBefore lists the APPROVED records approved
// before a time, oldest approval first, whatever happened to them after
// (a REPORT of an unfinished change does not renew an approval), and
// records leave it when they leave APPROVED.
func storeApproved(t *testing.T, m Store) {
	ctx := t.Context()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	approved := func(id string, h int) {
		t.Helper()
		rec := &Record{ID: id, State: StatePending, CreatedAt: at(0)}
		rec.move(StatePending, at(0), "a", "")
		if err := m.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Update(ctx, id, func(r *Record) error { r.move(StateApproved, at(h), byPolicy, ""); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	approved("req-late", 5)
	approved("req-early", 1)
	approved("req-mid", 3)
	// A note appended later (REPORT with completed: false) keeps the
	// approval time.
	if _, err := m.Update(ctx, "req-early", func(r *Record) error {
		r.History = append(r.History, Transition{State: StateApproved, At: at(4), By: "a", Note: "not completed"})
		r.UpdatedAt = at(4)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ids := func(before time.Time) []string {
		t.Helper()
		recs, err := m.ApprovedBefore(ctx, before)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		before time.Time
		want   []string
	}{
		{at(1), nil}, // strictly before
		{at(1).Add(time.Microsecond), []string{"req-early"}},
		{at(4), []string{"req-early", "req-mid"}},
		{at(9), []string{"req-early", "req-mid", "req-late"}},
	} {
		if got := ids(tc.before); !slices.Equal(got, tc.want) {
			t.Errorf("approved before %s: %v, want %v", tc.before.Format(time.Kitchen), got, tc.want)
		}
	}
	if _, err := m.Update(ctx, "req-mid", func(r *Record) error { r.move(StateExpired, at(6), byExpiry, ""); return nil }); err != nil {
		t.Fatal(err)
	}
	if got := ids(at(9)); !slices.Equal(got, []string{"req-early", "req-late"}) {
		t.Errorf("after an expiry: %v", got)
	}
}

// Review sessions: created once per id, read back, deleted, and forgotten
// by the store after their ttl.
func storeSessions(t *testing.T, m Store) {
	ctx := t.Context()
	exp := time.Date(2025, 1, 1, 8, 0, 0, 0, time.UTC)
	s := &ReviewSession{Name: "alice", CSRF: "c1", Expires: exp}
	if err := m.CreateSession(ctx, "sid-1", s, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateSession(ctx, "sid-1", &ReviewSession{Name: "mallory"}, time.Hour); !errors.Is(err, ErrExists) {
		t.Fatalf("second create of one id: %v", err)
	}
	got, err := m.Session(ctx, "sid-1")
	if err != nil || !reflect.DeepEqual(*got, ReviewSession{Name: "alice", CSRF: "c1", Expires: exp}) {
		t.Fatalf("session: %+v %v", got, err)
	}
	if _, err := m.Session(ctx, "sid-2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
	if err := m.DeleteSession(ctx, "sid-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Session(ctx, "sid-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted session: %v", err)
	}
	if err := m.DeleteSession(ctx, "sid-1"); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
	if err := m.CreateSession(ctx, "sid-short", s, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	if _, err := m.Session(ctx, "sid-short"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("session past its ttl: %v", err)
	}
}

func TestMemoryStoreApprovedAndSessions(t *testing.T) {
	t.Run("approved index", func(t *testing.T) { storeApproved(t, NewMemoryStore()) })
	t.Run("sessions", func(t *testing.T) { storeSessions(t, NewMemoryStore()) })
}
