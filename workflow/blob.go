package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/limit"
)

// Binary data by reference: a base64 value in a step's data that is larger
// than the inline limit is moved to a blob store and replaced by a
// reference, so runs, the audit trail and the next prompts carry a short
// {"$ref": "blob:sha256:…"} instead of megabytes; GET /blobs/{sha256}
// serves the bytes to the run's agents only.

// Blob is stored binary data and who may read it.
type Blob struct {
	SHA256    string
	MediaType string
	Data      []byte
	// Agents may read it: the run's caller and its nodes' agents.
	Agents []string
}

// ErrBlobTooLarge is a blob the store has no room for.
var ErrBlobTooLarge = errors.New("blob larger than the store allows")

// BlobStore keeps blobs by SHA-256.
type BlobStore interface {
	// Put stores b; storing the same bytes again adds its agents.
	Put(ctx context.Context, b Blob) error
	// Get returns the blob, or ErrNotFound.
	Get(ctx context.Context, sha string) (Blob, error)
}

// MemoryBlobStore keeps blobs in this process, within a total size: when
// full, the oldest go first.
type MemoryBlobStore struct {
	mu    sync.Mutex
	max   int
	used  int
	blobs map[string]*Blob
	order []string
}

// NewMemoryBlobStore keeps at most maxBytes of blobs (0: 256 MiB).
func NewMemoryBlobStore(maxBytes int) *MemoryBlobStore {
	if maxBytes <= 0 {
		maxBytes = 256 << 20
	}
	return &MemoryBlobStore{max: maxBytes, blobs: map[string]*Blob{}}
}

// Put implements BlobStore.
func (s *MemoryBlobStore) Put(_ context.Context, b Blob) error {
	if len(b.Data) > s.max {
		return ErrBlobTooLarge
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.blobs[b.SHA256]; ok {
		old.Agents = union(old.Agents, b.Agents)
		return nil
	}
	for s.used+len(b.Data) > s.max && len(s.order) > 0 {
		oldest := s.order[0]
		s.order = s.order[1:]
		s.used -= len(s.blobs[oldest].Data)
		delete(s.blobs, oldest)
	}
	c := b
	c.Data = slices.Clone(b.Data)
	c.Agents = slices.Clone(b.Agents)
	s.blobs[b.SHA256] = &c
	s.order = append(s.order, b.SHA256)
	s.used += len(b.Data)
	return nil
}

// Get implements BlobStore.
func (s *MemoryBlobStore) Get(_ context.Context, sha string) (Blob, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[sha]
	if !ok {
		return Blob{}, ErrNotFound
	}
	c := *b
	c.Agents = slices.Clone(b.Agents)
	return c, nil
}

// RedisBlobStore keeps blobs in Redis for the runs' retention, shared by the
// replicas: <prefix>:workflow:blob:{<sha>} is a hash (data, media_type) and
// <prefix>:workflow:blob:{<sha>}:agents the set of readers. The digest is
// the hash tag: a blob's two keys are written in one MULTI, so on a Redis
// Cluster they must share a slot, and blobs spread over the cluster.
// (Before the tag, the keys had the bare digest: blobs written by an
// earlier version are not found, which a run's retention soon makes moot.)
type RedisBlobStore struct {
	client    redis.UniversalClient
	prefix    string
	timeout   time.Duration
	retention time.Duration
	max       int
}

// NewRedisBlobStore stores blobs of at most maxBytes each (0: 16 MiB).
func NewRedisBlobStore(client redis.UniversalClient, prefix string, timeout time.Duration, maxBytes int) *RedisBlobStore {
	if prefix == "" {
		prefix = "gw"
	}
	if timeout <= 0 {
		timeout = DefaultRedisTimeout
	}
	if maxBytes <= 0 {
		maxBytes = 16 << 20
	}
	return &RedisBlobStore{client: client, prefix: prefix, timeout: timeout, retention: DefaultRetention, max: maxBytes}
}

func (s *RedisBlobStore) key(sha string) string { return s.prefix + ":workflow:blob:{" + sha + "}" }

// Put implements BlobStore.
func (s *RedisBlobStore) Put(ctx context.Context, b Blob) error {
	if len(b.Data) > s.max {
		return ErrBlobTooLarge
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	k := s.key(b.SHA256)
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k, "data", b.Data, "media_type", b.MediaType)
		p.Expire(ctx, k, s.retention)
		if len(b.Agents) > 0 {
			p.SAdd(ctx, k+":agents", anySlice(b.Agents)...)
			p.Expire(ctx, k+":agents", s.retention)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("workflow: store blob %s: %w", b.SHA256, limit.MarkUnavailable(err))
	}
	return nil
}

// Get implements BlobStore.
func (s *RedisBlobStore) Get(ctx context.Context, sha string) (Blob, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	k := s.key(sha)
	var fields *redis.MapStringStringCmd
	var agents *redis.StringSliceCmd
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		fields = p.HGetAll(ctx, k)
		agents = p.SMembers(ctx, k+":agents")
		return nil
	})
	if err != nil {
		return Blob{}, fmt.Errorf("workflow: read blob %s: %w", sha, limit.MarkUnavailable(err))
	}
	m := fields.Val()
	data, ok := m["data"]
	if !ok {
		return Blob{}, ErrNotFound
	}
	ag := agents.Val()
	slices.Sort(ag)
	return Blob{SHA256: sha, MediaType: m["media_type"], Data: []byte(data), Agents: ag}, nil
}

func union(a, b []string) []string {
	set := map[string]bool{}
	for _, s := range append(slices.Clone(a), b...) {
		set[s] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// dataURL is "data:<media type>;base64,<payload>", the way models and SDKs
// write binary inline.
var dataURL = regexp.MustCompile(`^data:([a-zA-Z0-9][a-zA-Z0-9!#$&^_.+-]{0,126}/[a-zA-Z0-9][a-zA-Z0-9!#$&^_.+-]{0,126});base64,`)

// RefPrefix starts every blob reference.
const RefPrefix = "blob:sha256:"

// externalize replaces, in data, every string that is base64 larger than
// limit bytes (as written) by a reference to a blob it stores, readable by
// agents. It returns the references made, in order.
func externalize(ctx context.Context, store BlobStore, data map[string]any, limit int, agents []string) ([]map[string]any, error) {
	var refs []map[string]any
	var walk func(v any) (any, error)
	walk = func(v any) (any, error) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				nv, err := walk(x[k])
				if err != nil {
					return nil, err
				}
				x[k] = nv
			}
		case []any:
			for i := range x {
				nv, err := walk(x[i])
				if err != nil {
					return nil, err
				}
				x[i] = nv
			}
		case string:
			if len(x) <= limit {
				return x, nil
			}
			media, raw, ok := decodeBase64(x)
			if !ok {
				return x, nil
			}
			sum := sha256.Sum256(raw)
			sha := hex.EncodeToString(sum[:])
			if err := store.Put(ctx, Blob{SHA256: sha, MediaType: media, Data: raw, Agents: agents}); err != nil {
				return nil, fmt.Errorf("binary value of %d bytes: %w", len(raw), err)
			}
			ref := map[string]any{"$ref": RefPrefix + sha, "media_type": media, "size": len(raw)}
			refs = append(refs, ref)
			return ref, nil
		}
		return v, nil
	}
	if _, err := walk(data); err != nil {
		return nil, err
	}
	return refs, nil
}

// decodeBase64 reads a data URL or bare base64 (standard or URL alphabet,
// padded or not); prose that happens to be long is not base64 (spaces,
// punctuation), so it stays inline.
func decodeBase64(s string) (media string, raw []byte, ok bool) {
	media = "application/octet-stream"
	if m := dataURL.FindStringSubmatch(s); m != nil {
		media, s = strings.ToLower(m[1]), s[len(m[0]):]
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.Strict().DecodeString(s); err == nil {
			return media, b, true
		}
	}
	return "", nil, false
}

// blobText is what {{blob path}} inserts: the referenced bytes as a data
// URL, for a node whose agent must see them.
func blobText(ctx context.Context, store BlobStore, ref any) (string, error) {
	m, ok := ref.(map[string]any)
	s, _ := m["$ref"].(string)
	if !ok || !strings.HasPrefix(s, RefPrefix) {
		return "", errors.New("not a blob reference")
	}
	b, err := store.Get(ctx, strings.TrimPrefix(s, RefPrefix))
	if err != nil {
		return "", fmt.Errorf("blob %s: %w", s, err)
	}
	return "data:" + b.MediaType + ";base64," + base64.StdEncoding.EncodeToString(b.Data), nil
}

// validSHA reports whether s is a lower-case hex SHA-256.
func validSHA(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
