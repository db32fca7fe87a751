package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// FileName is the memory backend's usage file in state.dir.
const FileName = "usage.json"

// FileStore keeps the days in a JSON file of one replica's state.dir,
// rewritten whole on every flush (a few KB: subjects × Days).
type FileStore struct {
	path string
	mu   sync.Mutex
	days book
	now  func() time.Time
}

// NewFileStore opens dir's usage file (created on the first flush).
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("usage file: %w", err)
	}
	s := &FileStore{path: filepath.Join(dir, FileName), days: book{}, now: time.Now}
	raw, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("usage file: %w", err)
	}
	if err := json.Unmarshal(raw, &s.days); err != nil {
		return nil, fmt.Errorf("usage file %s is not valid (fix or remove it; its history is lost if removed): %w", s.path, err)
	}
	if s.days == nil {
		s.days = book{}
	}
	return s, nil
}

// Add implements Store.
func (s *FileStore) Add(_ context.Context, day string, counts map[string]Counts) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.days.merge(day, counts)
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
	out := book{}
	for _, d := range days {
		out.merge(d, s.days[d])
	}
	return out, nil
}
