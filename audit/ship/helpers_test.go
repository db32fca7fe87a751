package ship

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/sacpgw/gateway/audit"
)

const bucket = "trail"

// s3Server is gofakes3 (an in-process S3 implementation, its in-memory
// backend) on a real HTTP listener, with every PUT recorded.
type s3Server struct {
	*httptest.Server
	backend *s3mem.Backend
	mu      sync.Mutex
	puts    map[string]int         // key -> PUTs that succeeded
	headers map[string]http.Header // key -> the last PUT's headers
	// stall, when set, is called with each PUT's key; true holds that PUT
	// (body read, nothing stored) until the client goes away.
	stall func(key string) bool
}

func newS3(t *testing.T) *s3Server {
	t.Helper()
	s := &s3Server{backend: s3mem.New(), puts: map[string]int{}, headers: map[string]http.Header{}}
	if err := s.backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(s.backend).Server()
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/"+bucket+"/")
		if r.Method != http.MethodPut {
			fake.ServeHTTP(w, r)
			return
		}
		s.mu.Lock()
		stall := s.stall != nil && s.stall(key)
		s.mu.Unlock()
		if stall {
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		fake.ServeHTTP(rec, r)
		if rec.status == http.StatusOK {
			s.mu.Lock()
			s.puts[key]++
			s.headers[key] = r.Header.Clone()
			s.mu.Unlock()
		}
	}))
	t.Cleanup(s.Close)
	return s
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

func (s *s3Server) putCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.puts {
		out[k] = v
	}
	return out
}

func (s *s3Server) config(prefix string) Config {
	c := Config{URL: "s3://" + bucket + "/" + prefix, Endpoint: s.URL, AccessKeyID: "test", SecretAccessKey: "test-secret",
		PathStyle: true, Interval: time.Second}
	if p := c.Validate(); len(p) > 0 {
		panic(p[0].Msg)
	}
	return c
}

// keys writes a signing key pair in dir.
func keys(t *testing.T, dir string) (priv string, pub string) {
	t.Helper()
	priv, pub = filepath.Join(dir, "sign.pem"), filepath.Join(dir, "sign.pub")
	if err := audit.Keygen(priv, pub); err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// openChain opens chain in dir with small segments and a checkpoint
// every 5 entries.
func openChain(t *testing.T, dir, chain, keyFile string) *audit.Log {
	t.Helper()
	l, err := audit.Open(audit.Config{Dir: dir, Chain: chain, SigningKeyFile: keyFile, SegmentMaxBytes: 1500,
		CheckpointEvery: 5, CheckpointInterval: -1, CommitDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func appendN(t *testing.T, l *audit.Log, n int) {
	t.Helper()
	for i := range n {
		if _, err := l.Append(context.Background(), audit.Record{Kind: audit.KindLLMRequest, AgentID: "agent-a",
			Object: audit.Members("model", "gpt-test", "i", i)}); err != nil {
			t.Fatal(err)
		}
	}
}

func pubKey(t *testing.T, file string) audit.Options {
	t.Helper()
	k, err := audit.LoadPublicKey(file)
	if err != nil {
		t.Fatal(err)
	}
	return audit.Options{Keys: []ed25519.PublicKey{k}}
}

func mustNew(t *testing.T, cfg Config, dir string) *Shipper {
	t.Helper()
	s, err := New(cfg, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func verifyFrom(t *testing.T, cfg Config, o audit.Options) (audit.Report, error) {
	t.Helper()
	tr, err := OpenTrail(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr.Verify(o)
}

func asFailure(err error, f **audit.Failure) bool { return errors.As(err, f) }
