package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/roster"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/audit/ship"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/testkit"
)

// serveShipping runs Serve with audit.ship to an in-process S3 server
// until it answers, then stops it; it returns what Serve logged.
func serveShipping(t *testing.T, endpoint, extra string) string {
	t.Helper()
	dir := t.TempDir()
	main, health := freeAddr(t), freeAddr(t)
	files := map[string]string{
		config.GatewayFile: "listen: " + main + "\nhealth_listen: " + health + "\n" +
			"upstreams:\n  - {name: mock, type: mock, models: ['*']}\n" +
			"audit:\n  dir: " + filepath.Join(dir, "audit") + "\n  chain: gw-ship\n" +
			"  ship: {url: 's3://trail/fleet', endpoint: '" + endpoint + "', access_key_id: k, secret_access_key: '${S3_SECRET}', path_style: true, interval: 1h}\n" +
			"state: {dir: " + filepath.Join(dir, "state") + "}\n" + extra,
		config.AgentsFile:   "agents:\n  a1:\n    token_sha256: \"" + roster.HashTokenHex("tok") + "\"\n",
		config.ProtocolFile: "protocol: {}\n",
	}
	for name, c := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("S3_SECRET", "test-secret-value")
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, Options{Version: "test"}, logs) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if res, err := http.Get("http://" + health + "/healthz"); err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the gateway never answered\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return")
	}
	if strings.Contains(logs.String(), "test-secret-value") {
		t.Fatal("the storage secret is in the log")
	}
	return logs.String()
}

// A gateway that stops ships its open segment and final checkpoint: the
// bucket then holds its whole chain, final checkpoint included. The
// storage is an outbound call like any other: at a private address it is
// reached only when messaging.allowed_networks lists it, and a refused
// one does not stop the gateway from serving.
func TestServeShipsTheTrailAtShutdown(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("trail"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer srv.Close()
	cfg := ship.Config{URL: "s3://trail/fleet", Endpoint: srv.URL, AccessKeyID: "k", SecretAccessKey: "s", PathStyle: true}
	cfg.Validate()

	log := serveShipping(t, srv.URL, "")
	if !strings.Contains(log, "destination not allowed") {
		t.Fatalf("shipping to a loopback address not in messaging.allowed_networks was not refused:\n%s", log)
	}
	tr, err := ship.OpenTrail(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep, _ := tr.Verify(audit.Options{}); len(rep.Chains) != 0 {
		t.Fatalf("the guard let %d chains through", len(rep.Chains))
	}

	serveShipping(t, srv.URL, "messaging: {allowed_networks: [127.0.0.0/8]}\n")
	tr, err = ship.OpenTrail(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tr.Verify(audit.Options{})
	if err != nil || len(rep.Chains) != 1 || rep.Chains[0].Chain != "gw-ship" || rep.Entries == 0 {
		t.Fatalf("bucket after shutdown: %+v, %v", rep, err)
	}
	if un := ship.Unfinished(rep); len(un) != 0 {
		t.Fatalf("the final checkpoint was not shipped: %v", un)
	}
}
