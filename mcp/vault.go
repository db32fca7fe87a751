package mcp

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/mcp/mcpconf"
)

// TokenStore keeps the people's delegated tokens, sealed (the store never
// sees a token in the clear), by a key naming the server and the person.
type TokenStore interface {
	// Load returns the blob stored at key, or nil when there is none.
	Load(ctx context.Context, key string) ([]byte, error)
	Store(ctx context.Context, key string, blob []byte) error
	Delete(ctx context.Context, key string) error
}

// MemoryTokens is a TokenStore in this process.
type MemoryTokens struct{ m sync.Map }

// NewMemoryTokens returns an empty MemoryTokens.
func NewMemoryTokens() *MemoryTokens { return &MemoryTokens{} }

// Load implements TokenStore.
func (t *MemoryTokens) Load(_ context.Context, key string) ([]byte, error) {
	if b, ok := t.m.Load(key); ok {
		return b.([]byte), nil
	}
	return nil, nil
}

// Store implements TokenStore.
func (t *MemoryTokens) Store(_ context.Context, key string, blob []byte) error {
	t.m.Store(key, blob)
	return nil
}

// Delete implements TokenStore.
func (t *MemoryTokens) Delete(_ context.Context, key string) error {
	t.m.Delete(key)
	return nil
}

// RedisTokens keeps the sealed tokens in Redis, shared by the replicas,
// under <prefix>token:; every call bounded by timeout.
type RedisTokens struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
}

// NewRedisTokens returns the tokens on client (the caller's). prefix ""
// is DefaultRedisPrefix; timeout zero is DefaultRedisTimeout.
func NewRedisTokens(client redis.UniversalClient, prefix string, timeout time.Duration) *RedisTokens {
	prefix, timeout = redisDefaults(prefix, timeout)
	return &RedisTokens{client: client, prefix: prefix + "token:", timeout: timeout}
}

// Load implements TokenStore.
func (t *RedisTokens) Load(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	b, err := t.client.Get(ctx, t.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mcp tokens: load: %w", err)
	}
	return b, nil
}

// Store implements TokenStore.
func (t *RedisTokens) Store(ctx context.Context, key string, blob []byte) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	if err := t.client.Set(ctx, t.prefix+key, blob, 0).Err(); err != nil {
		return fmt.Errorf("mcp tokens: store: %w", err)
	}
	return nil
}

// Delete implements TokenStore.
func (t *RedisTokens) Delete(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	if err := t.client.Del(ctx, t.prefix+key).Err(); err != nil {
		return fmt.Errorf("mcp tokens: delete: %w", err)
	}
	return nil
}

// tokenKey is where a person's token for a server is stored: the server's
// name and a hash of the person's subject (the store need not learn who).
func tokenKey(server, subject string) string {
	h := sha256.Sum256([]byte(subject))
	return server + ":" + hex.EncodeToString(h[:])
}

// sealer encrypts the stored tokens with AES-256-GCM under mcp.token_key.
// A blob is "v1.<key id>.<base64url(nonce|ciphertext)>": the key id names
// the key that sealed it, so a rotated key (previous_token_key) still
// opens what it sealed; the associated data binds the blob to its server
// and person, so a blob moved to another key in the store does not open.
type sealer struct {
	current string
	keys    map[string]cipher.AEAD
}

// newSealer returns the sealer of m's keys; nil when m has no token_key.
func newSealer(m mcpconf.Settings) (*sealer, error) {
	if m.TokenKey == "" {
		return nil, nil
	}
	s := &sealer{keys: map[string]cipher.AEAD{}}
	for i, k := range []string{m.TokenKey, m.PreviousTokenKey} {
		if k == "" {
			continue
		}
		raw, err := mcpconf.TokenKey(k)
		if err != nil {
			return nil, fmt.Errorf("mcp.token_key: %w", err)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("mcp.token_key: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("mcp.token_key: %w", err)
		}
		id := keyID(raw)
		if i == 0 {
			s.current = id
		}
		s.keys[id] = aead
	}
	return s, nil
}

// keyID names a key without revealing it.
func keyID(raw []byte) string {
	h := sha256.Sum256(append([]byte("sacp-gateway mcp token key\x00"), raw...))
	return hex.EncodeToString(h[:6])
}

func sealAD(server, subject string) []byte {
	return []byte("sacp-gateway mcp token\x00" + server + "\x00" + subject)
}

func (s *sealer) seal(server, subject string, plain []byte) []byte {
	aead := s.keys[s.current]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails (Go 1.24)
	ct := aead.Seal(nonce, nonce, plain, sealAD(server, subject))
	return []byte("v1." + s.current + "." + base64.RawURLEncoding.EncodeToString(ct))
}

// errSealed is a stored blob that does not open: another key, another
// server's or person's, or damaged. The person connects again.
var errSealed = errors.New("the stored token does not open with mcp.token_key")

func (s *sealer) open(server, subject string, blob []byte) ([]byte, error) {
	parts := strings.SplitN(string(blob), ".", 3)
	if len(parts) != 3 || parts[0] != "v1" {
		return nil, errSealed
	}
	aead, ok := s.keys[parts[1]]
	if !ok {
		return nil, errSealed
	}
	ct, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(ct) < aead.NonceSize() {
		return nil, errSealed
	}
	plain, err := aead.Open(nil, ct[:aead.NonceSize()], ct[aead.NonceSize():], sealAD(server, subject))
	if err != nil {
		return nil, errSealed
	}
	return plain, nil
}
