package registry

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testredis"
)

// storeKinds are every Store implementation, each on fresh state.
func storeKinds() map[string]func(t *testing.T) Store {
	return map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemoryStore() },
		"file": func(t *testing.T) Store {
			s, err := NewFileStore(filepath.Join(t.TempDir(), "state"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"redis": func(t *testing.T) Store {
			srv := testredis.Start(t)
			return NewRedisStore(srv.Client(t), "test")
		},
	}
}

var (
	hashA = strings.Repeat("a1", 32)
	hashB = strings.Repeat("b2", 32)
)

func storeEntry(name, tokenHash string, at time.Time) Entry {
	return Entry{AgentName: name, Type: "spawned", Profile: roster.Profile{SupportedVerbs: []string{"check"}, SupportedTools: []string{"VISA_Q"},
		Inputs: []string{"nationality"}, Outputs: []string{"visa_required"}, Description: "Visa rules", Tags: []string{}},
		Endpoint: "https://visa.example/in", TokenSHA256: tokenHash, Spawned: true, SpawnedBy: "agent:orch", SpawnedAt: at}
}

// TestStoreBehaviour holds every Store to one contract: what Registry
// relies on, whichever backend app picks.
func TestStoreBehaviour(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for kind, mk := range storeKinds() {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			s := mk(t)
			find := func(name string) (Entry, bool) {
				t.Helper()
				list, err := s.List(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range list {
					if e.AgentName == name {
						return e, true
					}
				}
				return Entry{}, false
			}

			// Add, and a second Add of the name.
			if err := s.Add(ctx, storeEntry("VISA", hashA, t0)); err != nil {
				t.Fatal(err)
			}
			if err := s.Add(ctx, storeEntry("VISA", hashB, t0)); !errors.Is(err, ErrExists) {
				t.Errorf("second add: %v, want ErrExists", err)
			}
			if err := s.Add(ctx, storeEntry("TAX", "", t0)); err != nil {
				t.Fatal(err)
			}
			if list, _ := s.List(ctx); len(list) != 2 {
				t.Errorf("list %d entries, want 2", len(list))
			}
			e, ok := find("VISA")
			if !ok || e.TokenSHA256 != hashA || e.Endpoint != "https://visa.example/in" || !e.SpawnedAt.Equal(t0) ||
				e.SpawnedBy != "agent:orch" || !e.Spawned || e.Description != "Visa rules" || !e.LastUsedAt.IsZero() {
				t.Errorf("stored entry %+v", e)
			}

			// Last use: forward only, unknown names refused.
			tests := []struct {
				name string
				at   time.Time
				want time.Time
				err  error
			}{
				{"first use", t0.Add(time.Hour), t0.Add(time.Hour), nil},
				{"later use", t0.Add(2 * time.Hour), t0.Add(2 * time.Hour), nil},
				{"an earlier time does not move it back", t0.Add(90 * time.Minute), t0.Add(2 * time.Hour), nil},
				{"unknown agent", t0, time.Time{}, ErrNotFound},
			}
			for _, tc := range tests {
				name := "VISA"
				if tc.err != nil {
					name = "NOBODY"
				}
				err := s.SetLastUsed(ctx, name, tc.at)
				if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
					t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
					continue
				}
				if tc.err != nil {
					if _, ok := find(name); ok {
						t.Errorf("%s: SetLastUsed created %s", tc.name, name)
					}
					continue
				}
				if e, _ := find(name); !e.LastUsedAt.Equal(tc.want) || e.TokenSHA256 != hashA {
					t.Errorf("%s: last used %v (hash %q), want %v", tc.name, e.LastUsedAt, e.TokenSHA256, tc.want)
				}
			}

			// Remove: gone, its last use too; a second Remove is ErrNotFound.
			if err := s.Remove(ctx, "VISA"); err != nil {
				t.Fatal(err)
			}
			if _, ok := find("VISA"); ok {
				t.Error("removed entry still listed")
			}
			if err := s.Remove(ctx, "VISA"); !errors.Is(err, ErrNotFound) {
				t.Errorf("second remove: %v, want ErrNotFound", err)
			}
			if err := s.SetLastUsed(ctx, "VISA", t0.Add(3*time.Hour)); !errors.Is(err, ErrNotFound) {
				t.Errorf("last use of a removed agent: %v, want ErrNotFound", err)
			}
			if err := s.Add(ctx, storeEntry("VISA", hashB, t0.Add(time.Minute))); err != nil {
				t.Fatal(err)
			}
			if e, _ := find("VISA"); e.TokenSHA256 != hashB || !e.LastUsedAt.IsZero() {
				t.Errorf("a new agent of a removed name: %+v", e)
			}
			if _, ok := find("TAX"); !ok {
				t.Error("removing VISA removed TAX")
			}

			// Pending token hashes: taken once, replaced, expired.
			now := time.Now()
			if err := s.PutPending(ctx, "k1", hashA, time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if err := s.PutPending(ctx, "k2", hashA, time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if err := s.PutPending(ctx, "k2", hashB, time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				key  string
				want string
				ok   bool
			}{{"k1", hashA, true}, {"k1", "", false}, {"k2", hashB, true}, {"k3", "", false}} {
				got, ok, err := s.TakePending(ctx, tc.key, now)
				if err != nil || got != tc.want || ok != tc.ok {
					t.Errorf("take %s: %q %v %v, want %q %v", tc.key, got, ok, err, tc.want, tc.ok)
				}
			}
			// Redis expires by its own clock, the others by the caller's.
			if err := s.PutPending(ctx, "old", hashA, time.Now().Add(-time.Second)); err != nil {
				t.Fatal(err)
			}
			if got, ok, err := s.TakePending(ctx, "old", time.Now()); ok || err != nil {
				t.Errorf("an expired hash was taken: %q %v %v", got, ok, err)
			}
		})
	}
}

// The stored form keeps what the registry needs and never the token; the
// shown form keeps neither the hash nor the endpoint.
func TestStoredFormRoundTrip(t *testing.T) {
	e := storeEntry("VISA", hashA, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e.LastUsedAt = e.SpawnedAt.Add(time.Hour)
	back := toStored(e).entry()
	if back.TokenSHA256 != e.TokenSHA256 || back.Endpoint != e.Endpoint || !back.LastUsedAt.Equal(e.LastUsedAt) {
		t.Errorf("round trip %+v", back)
	}
	shown := mustJSON(t, e)
	for _, secret := range []string{hashA, "visa.example", "last_used", "token"} {
		if strings.Contains(shown, secret) {
			t.Errorf("shown entry %s contains %q", shown, secret)
		}
	}
}

// TestFileStoreSurvivesRestart: a new FileStore on the same directory
// sees what the last one stored (entries with their token hash, endpoint
// and last use; pending hashes), in a 0600 file of a 0700 directory.
func TestFileStoreSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state", "nested")
	s1, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, e := range []Entry{storeEntry("VISA", hashA, t0), storeEntry("TAX", hashB, t0), storeEntry("GONE", "", t0)} {
		if err := s1.Add(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s1.SetLastUsed(ctx, "VISA", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s1.Remove(ctx, "GONE"); err != nil {
		t.Fatal(err)
	}
	if err := s1.PutPending(ctx, "k", hashB, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}

	s2, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := s2.List(ctx)
	got := map[string]Entry{}
	for _, e := range list {
		got[e.AgentName] = e
	}
	if len(got) != 2 || got["VISA"].TokenSHA256 != hashA || got["TAX"].TokenSHA256 != hashB ||
		got["VISA"].Endpoint != "https://visa.example/in" || !got["VISA"].LastUsedAt.Equal(t0.Add(time.Hour)) ||
		!got["TAX"].SpawnedAt.Equal(t0) || got["TAX"].SpawnedBy != "agent:orch" {
		t.Errorf("after a restart: %+v", got)
	}
	if sum, ok, err := s2.TakePending(ctx, "k", t0); !ok || sum != hashB || err != nil {
		t.Errorf("pending after a restart: %q %v %v", sum, ok, err)
	}
	// Taking it was written too.
	s3, _ := NewFileStore(dir)
	if _, ok, _ := s3.TakePending(ctx, "k", t0); ok {
		t.Error("a taken hash came back after a restart")
	}

	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, FileName): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d files (temporary files left?)", len(entries))
	}
}

// A file the store cannot read is an error naming it, never an empty
// registry.
func TestFileStoreRefusesCorruptFile(t *testing.T) {
	ok := `{"agents":[{"agent_name":"VISA","supported_verbs":[],"supported_tools":[],"inputs":[],"outputs":[],"description":"","tags":[],"spawned":true,"token_sha256":"` + hashA + `"}]}`
	tests := []struct {
		name string
		body string
		want string // in the error; "" means accepted
	}{
		{"valid", ok, ""},
		{"no agents yet", `{"agents":[]}`, ""},
		{"empty file", ``, "unexpected end"},
		{"truncated", ok[:len(ok)/2], "unexpected end"},
		{"not JSON", `spawned agents`, "invalid character"},
		{"trailing data", ok + `{}`, "invalid character"},
		{"a list", `[]`, "cannot unmarshal"},
		{"no agents member", `{}`, "agents"},
		{"bad token hash", strings.Replace(ok, hashA, "not-a-hash", 1), "token_sha256"},
		{"upper-case token hash", strings.Replace(ok, hashA, strings.ToUpper(hashA), 1), "token_sha256"},
		{"invalid name", strings.Replace(ok, `"VISA"`, `"a b"`, 1), "agent name"},
		{"not spawned", strings.Replace(ok, `"spawned":true`, `"spawned":false`, 1), "not a spawned agent"},
		{"duplicate", `{"agents":[` + ok[11:len(ok)-2] + `,` + ok[11:len(ok)-2] + `]}`, "already registered"},
		{"bad pending", `{"agents":[],"pending":[{"key":"k","token_sha256":"x"}]}`, "pending[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := NewFileStore(dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				list, _ := s.List(context.Background())
				t.Fatalf("accepted, with %d agents", len(list))
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to name %s and say %q", err, path, tc.want)
			}
		})
	}
}

// A change the file refused is not kept in memory either: what the store
// answers is what a restart would read.
func TestFileStoreKeepsNothingUnwritten(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	s, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, storeEntry("VISA", hashA, time.Now())); err != nil {
		t.Fatal(err)
	}
	// The directory becomes a file: no temporary file can be made in it
	// (a permission change would not stop root).
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"add":       func() error { return s.Add(ctx, storeEntry("TAX", hashB, time.Now())) },
		"remove":    func() error { return s.Remove(ctx, "VISA") },
		"last used": func() error { return s.SetLastUsed(ctx, "VISA", time.Now().Add(time.Hour)) },
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s with an unwritable directory: %v", name, err)
		}
	}
	list, _ := s.List(ctx)
	if len(list) != 1 || list[0].AgentName != "VISA" || !list[0].LastUsedAt.IsZero() {
		t.Errorf("after refused writes: %+v", list)
	}
}
