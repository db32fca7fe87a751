package admin

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/testredis"
)

// TestRedisStore: the API on a real redis-server, two replicas (two
// stores on one server): what one creates, changes or revokes, the other
// sees on its next call; concurrent changes of one agent are all kept
// (the optimistic update retries).
func TestRedisStore(t *testing.T) {
	opts, err := redis.ParseURL(testredis.Start(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { client.Close() })
	one, two := harnessOn(t, NewRedisStore(client, time.Second)), harnessOn(t, NewRedisStore(client, time.Second))
	ctx := context.Background()
	one.must("admin", "POST", "/admin/teams", `{"name":"ops"}`, 201)
	two.must("admin", "POST", "/admin/agents", `{"name":"r-1","team":"ops","tags":[]}`, 201)
	var k IssuedKey
	_ = json.Unmarshal([]byte(one.must("admin", "POST", "/admin/agents/r-1/keys", "", 201)), &k)
	if name, _, ok, err := two.keys.AgentByKey(ctx, sha256.Sum256([]byte(k.Key))); !ok || err != nil || name != "r-1" {
		t.Fatalf("the other replica: %q %v %v", name, ok, err)
	}

	done := make(chan struct{})
	for i := range 8 {
		go func() {
			h := []*harness{one, two}[i%2]
			h.must("admin", "PATCH", "/admin/agents/r-1", `{"description":"v`+itoa(i)+`"}`, 200)
			done <- struct{}{}
		}()
	}
	for range 8 {
		<-done
	}
	if b := two.must("admin", "GET", "/admin/agents/r-1", "", 200); !strings.Contains(b, `"description":"v`) {
		t.Errorf("after concurrent changes: %s", b)
	}
	two.must("admin", "DELETE", "/admin/agents/r-1/keys/"+k.ID, "", 204)
	if _, _, ok, _ := one.keys.AgentByKey(ctx, sha256.Sum256([]byte(k.Key))); ok {
		t.Error("a key revoked on one replica authenticates on the other")
	}
	two.must("admin", "DELETE", "/admin/agents/r-1", "", 204)
	one.must("admin", "DELETE", "/admin/teams/ops", "", 204)
	if b := two.must("admin", "GET", "/admin/teams", "", 200); b != "{\"teams\":[]}\n" {
		t.Errorf("teams after the delete: %q", b)
	}
}

func itoa(i int) string { return string(rune('0' + i)) }
