package admin

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sum(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// TestKeysLifecycle: several keys per agent, each authenticating until
// it expires or is revoked; the store's file keeps agents and keys across
// a restart and never holds a key; last use is written at most once a
// minute per key.
func TestKeysLifecycle(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	ctx := context.Background()
	h.must("admin", "POST", "/admin/agents", `{"name":"rt","type":"coder"}`, 201)
	var k1, k2 IssuedKey
	_ = json.Unmarshal([]byte(h.must("admin", "POST", "/admin/agents/rt/keys", "", 201)), &k1)
	_ = json.Unmarshal([]byte(h.must("admin", "POST", "/admin/agents/rt/keys", `{"expires_in":"1h"}`, 201)), &k2)
	if st, b := h.do("admin", "POST", "/admin/agents/rt/keys", "", "Content-Type", "application/json"); st != http.StatusCreated || strings.Contains(b, "expires_at") {
		t.Errorf("an empty JSON body: %d %s, want a key without expiry", st, b)
	}
	if k1.Key == k2.Key || k1.ID == k2.ID || k2.Expires == nil {
		t.Fatalf("two keys: %+v %+v", k1, k2)
	}
	for _, k := range []IssuedKey{k1, k2} {
		name, a, ok, err := h.keys.AgentByKey(ctx, sum(k.Key))
		if !ok || err != nil || name != "rt" || a == nil || a.ID != "rt" || a.MaxRequestSize != 1<<20 {
			t.Fatalf("key %s: %q %+v %v %v", k.ID, name, a, ok, err)
		}
	}
	// A file agent's key authenticates as the file's agent (the identify
	// stage takes it from its own configuration).
	var fk IssuedKey
	_ = json.Unmarshal([]byte(h.must("admin", "POST", "/admin/agents/file-agent/keys", "", 201)), &fk)
	if name, a, ok, _ := h.keys.AgentByKey(ctx, sum(fk.Key)); !ok || name != "file-agent" || a != nil {
		t.Errorf("a file agent's key: %q %v %v", name, a, ok)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, FileName))
	for _, k := range []IssuedKey{k1, k2, fk} {
		if strings.Contains(string(raw), k.Key) {
			t.Fatalf("the file holds a key")
		}
	}
	list := h.must("admin", "GET", "/admin/agents/rt/keys", "", 200)
	if strings.Contains(list, k1.Key) || strings.Contains(list, "sha256") || strings.Count(list, `"last_used_at"`) != 2 {
		t.Errorf("keys list: %s", list)
	}

	// The clock moves past k2's expiry: it no longer authenticates.
	h.keys.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, _, ok, _ := h.keys.AgentByKey(ctx, sum(k2.Key)); ok {
		t.Error("an expired key authenticates")
	}
	h.keys.now = time.Now

	h.must("admin", "DELETE", "/admin/agents/rt/keys/"+k1.ID, "", 204)
	if _, _, ok, _ := h.keys.AgentByKey(ctx, sum(k1.Key)); ok {
		t.Error("a revoked key authenticates")
	}
	if st, _ := h.do("admin", "DELETE", "/admin/agents/rt/keys/"+k1.ID, ""); st != http.StatusNotFound {
		t.Errorf("revoking twice: %d, want 404", st)
	}

	// A restart on the same directory: the agent and its other key.
	h2 := newHarness(t, dir)
	if name, _, ok, err := h2.keys.AgentByKey(ctx, sum(k2.Key)); !ok || err != nil || name != "rt" {
		t.Errorf("after a restart: %q %v %v", name, ok, err)
	}
	// Deleting the agent takes its keys: none may ever authenticate as an
	// agents.yaml agent that takes the name later.
	h2.must("admin", "DELETE", "/admin/agents/rt", "", 204)
	if _, _, ok, _ := h2.keys.AgentByKey(ctx, sum(k2.Key)); ok {
		t.Error("a deleted agent's key authenticates")
	}
	if keys, _ := h2.store.Keys(ctx, "rt"); len(keys) != 0 {
		t.Errorf("a deleted agent's keys stay: %v", keys)
	}
}

// countingKV counts the writes of last use.
type countingKV struct {
	kv
	used int
}

func (c *countingKV) put(ctx context.Context, coll, id string, val []byte) error {
	if coll == collUsed {
		c.used++
	}
	return c.kv.put(ctx, coll, id, val)
}

// TestLastUseThrottled: a key used on every request is written at most
// once a minute.
func TestLastUseThrottled(t *testing.T) {
	m, _ := newMemoryKV("")
	c := &countingKV{kv: m}
	s := &Store{kv: c}
	k := NewKeys(s, nil)
	now := time.Now()
	k.now = func() time.Time { return now }
	key, id, h, _ := newKey()
	_ = s.AddKey(context.Background(), Key{ID: id, Agent: "file-agent", SHA256: h, Created: now})
	for range 100 {
		if _, _, ok, _ := k.AgentByKey(context.Background(), sum(key)); !ok {
			t.Fatal("key not found")
		}
	}
	now = now.Add(61 * time.Second)
	k.AgentByKey(context.Background(), sum(key))
	if c.used != 2 {
		t.Errorf("%d writes of last use for 101 uses over a minute, want 2", c.used)
	}
}
