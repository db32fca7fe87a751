package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultKeyPrefix is the prefix of the Redis hashes, one per day:
// gw:usage:2026-11-29, fields "<subject>|req", "|tok" and "|usd". Each
// command touches one key, so a Cluster may place the days anywhere.
const DefaultKeyPrefix = "gw:usage:"

// keep is how long a day's hash outlives its day: the page's Days and a
// margin for time zones and late flushes.
const keep = (Days + 2) * 24 * time.Hour

// RedisStore keeps the days in Redis, shared by every replica.
type RedisStore struct {
	client redis.UniversalClient
	prefix string
}

// NewRedisStore returns a store on client (the caller's; never closed
// here) under prefix ("" is DefaultKeyPrefix).
func NewRedisStore(client redis.UniversalClient, prefix string) *RedisStore {
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	return &RedisStore{client: client, prefix: prefix}
}

var fieldSuffix = [...]string{"|req", "|tok", "|usd"}

// Add implements Store: one pipeline of HINCRBYs on the day's hash and its
// expiry.
func (s *RedisStore) Add(ctx context.Context, day string, counts map[string]Counts) error {
	key := s.prefix + day
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for subj, c := range counts {
			for i, v := range [...]int64{c.Requests, c.Tokens, c.MicroUSD} {
				if v != 0 {
					p.HIncrBy(ctx, key, subj+fieldSuffix[i], v)
				}
			}
		}
		p.Expire(ctx, key, keep)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// Read implements Store: one HGETALL per day, in one pipeline.
func (s *RedisStore) Read(ctx context.Context, days []string) (map[string]map[string]Counts, error) {
	cmds := make([]*redis.MapStringStringCmd, len(days))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range days {
			cmds[i] = p.HGetAll(ctx, s.prefix+d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	out := map[string]map[string]Counts{}
	for i, d := range days {
		m := map[string]Counts{}
		for f, v := range cmds[i].Val() {
			subj, kind, ok := strings.Cut(f, "|")
			n, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil {
				continue // not a field this package writes
			}
			c := m[subj]
			switch kind {
			case "req":
				c.Requests = n
			case "tok":
				c.Tokens = n
			case "usd":
				c.MicroUSD = n
			default:
				continue
			}
			m[subj] = c
		}
		out[d] = m
	}
	return out, nil
}

// FileName is the memory backend's usage file in state.dir.
const FileName = "usage.json"

// FileStore keeps the days in a JSON file of one replica's state.dir,
// rewritten whole on every flush (a few KB: subjects × Days).
type FileStore struct {
	path string
	mu   sync.Mutex
	days map[string]map[string]Counts
	now  func() time.Time
}

// NewFileStore opens dir's usage file (created on the first flush).
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("usage file: %w", err)
	}
	s := &FileStore{path: filepath.Join(dir, FileName), days: map[string]map[string]Counts{}, now: time.Now}
	raw, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("usage file: %w", err)
	}
	if err := json.Unmarshal(raw, &s.days); err != nil {
		return nil, fmt.Errorf("usage file %s is not valid (fix or remove it; its history is lost if removed): %w", s.path, err)
	}
	if s.days == nil {
		s.days = map[string]map[string]Counts{}
	}
	return s, nil
}

// Add implements Store.
func (s *FileStore) Add(_ context.Context, day string, counts map[string]Counts) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.days[day]
	if m == nil {
		m = map[string]Counts{}
		s.days[day] = m
	}
	for subj, c := range counts {
		v := m[subj]
		v.add(c)
		m[subj] = v
	}
	oldest := Day(s.now().Add(-keep))
	for d := range s.days {
		if d < oldest {
			delete(s.days, d)
		}
	}
	return s.write()
}

// write replaces the file by a complete new one (never a torn one).
func (s *FileStore) write() error {
	raw, err := json.Marshal(s.days)
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return fmt.Errorf("usage file: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("usage file: %w", err)
	}
	return nil
}

// Read implements Store.
func (s *FileStore) Read(_ context.Context, days []string) (map[string]map[string]Counts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[string]Counts{}
	for _, d := range days {
		m := map[string]Counts{}
		for subj, c := range s.days[d] {
			m[subj] = c
		}
		out[d] = m
	}
	return out, nil
}
