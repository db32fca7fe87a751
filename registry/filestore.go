package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/sacpgw/gateway/internal/atomicfile"
	"github.com/sacpgw/gateway/internal/names"
)

// FileName is the file of FileStore in its directory (state.dir).
const FileName = "spawned-agents.json"

// FileStore keeps spawned agents in this process and in one file, so that
// they survive a restart with state.backend memory: an agent that holds a
// token must not lose its identity because the gateway restarted. Every
// change is written to the file before it is answered (a change the file
// refused is not kept in memory either), atomically: the file is always
// the old or the new state, never half of one.
//
// One process owns a directory: two gateways sharing one would overwrite
// each other's changes (state.backend redis is for replicas).
type FileStore struct {
	path string
	dir  string

	mu  sync.Mutex
	set *spawnedSet
}

// fileState is the file's JSON form.
type fileState struct {
	// Agents are the stored entries (endpoint and token hash included),
	// by name.
	Agents []stored `json:"agents"`
	// Pending are the token hashes of spawns that wait for a person.
	Pending []filePending `json:"pending,omitempty"`
}

type filePending struct {
	Key string `json:"key"`
	pendingToken
}

// NewFileStore opens the store of dir (created 0700 if missing), reading
// <dir>/spawned-agents.json if it exists. A file that cannot be read or
// decoded is an error naming it: starting empty would silently retire
// every spawned agent, and the next write would destroy the evidence.
func NewFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("registry: file store: no directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("registry: file store: %w", err)
	}
	s := &FileStore{dir: dir, path: filepath.Join(dir, FileName), set: newSpawnedSet()}
	raw, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("registry: read %s: %w", s.path, err)
	}
	if err := s.load(raw); err != nil {
		return nil, fmt.Errorf("registry: %s is not a valid spawned-agents file (fix or remove it; its agents are lost if removed): %w", s.path, err)
	}
	return s, nil
}

// load decodes the file into s.set, checking what the registry relies on.
func (s *FileStore) load(raw []byte) error {
	var st fileState
	// Unmarshal refuses anything after the object too. Unknown members are
	// ignored: a newer gateway's file stays readable after a rollback, and
	// nothing unknown can grant anything.
	if err := json.Unmarshal(raw, &st); err != nil {
		return err
	}
	if st.Agents == nil {
		return errors.New(`no "agents" list`)
	}
	for i, a := range st.Agents {
		e := a.entry()
		if err := names.Check(e.AgentName); err != nil {
			return fmt.Errorf("agents[%d]: %w", i, err)
		}
		if !e.Spawned {
			return fmt.Errorf("agents[%d] (%s): not a spawned agent", i, e.AgentName)
		}
		if e.TokenSHA256 != "" && !isHexSHA256(e.TokenSHA256) {
			return fmt.Errorf("agents[%d] (%s): token_sha256 is not a lowercase hex SHA-256", i, e.AgentName)
		}
		if err := s.set.add(e); err != nil {
			return fmt.Errorf("agents[%d]: %w", i, err)
		}
	}
	for i, p := range st.Pending {
		if p.Key == "" || !isHexSHA256(p.TokenSHA256) {
			return fmt.Errorf("pending[%d]: want a key and a lowercase hex SHA-256", i)
		}
		s.set.putPending(p.Key, p.TokenSHA256, p.Expires)
	}
	return nil
}

// update applies change to a copy of the state and keeps the copy once
// the file holds it. change reports whether there is anything to write.
func (s *FileStore) update(change func(*spawnedSet) (bool, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.set.clone()
	changed, err := change(next)
	if err != nil || !changed {
		return err
	}
	renamed, err := s.write(next)
	if renamed {
		// The file holds next even if syncing its directory failed:
		// memory must not disagree with what a restart would read.
		s.set = next
	}
	return err
}

// write replaces the file atomically (atomicfile.Write).
func (s *FileStore) write(set *spawnedSet) (renamed bool, err error) {
	st := fileState{Agents: make([]stored, 0, len(set.agents))}
	for _, e := range set.agents {
		st.Agents = append(st.Agents, toStored(e))
	}
	sort.Slice(st.Agents, func(i, j int) bool { return st.Agents[i].AgentName < st.Agents[j].AgentName })
	for k, p := range set.pending {
		st.Pending = append(st.Pending, filePending{Key: k, pendingToken: p})
	}
	sort.Slice(st.Pending, func(i, j int) bool { return st.Pending[i].Key < st.Pending[j].Key })
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return false, fmt.Errorf("registry: encode %s: %w", s.path, err)
	}
	renamed, err = atomicfile.Write(s.dir, FileName, append(raw, '\n'))
	if err != nil {
		return renamed, fmt.Errorf("registry: %w", err)
	}
	return true, nil
}

// Add implements Store.
func (s *FileStore) Add(_ context.Context, e Entry) error {
	return s.update(func(set *spawnedSet) (bool, error) { return true, set.add(e) })
}

// List implements Store (from memory: the file is only written).
func (s *FileStore) List(context.Context) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set.list(), nil
}

// Remove implements Store.
func (s *FileStore) Remove(_ context.Context, name string) error {
	return s.update(func(set *spawnedSet) (bool, error) { return true, set.remove(name) })
}

// SetLastUsed implements Store.
func (s *FileStore) SetLastUsed(_ context.Context, name string, at time.Time) error {
	return s.update(func(set *spawnedSet) (bool, error) { return set.setLastUsed(name, at) })
}

// PutPending implements Store.
func (s *FileStore) PutPending(_ context.Context, key, sum string, expires time.Time) error {
	return s.update(func(set *spawnedSet) (bool, error) {
		set.putPending(key, sum, expires)
		return true, nil
	})
}

// TakePending implements Store.
func (s *FileStore) TakePending(_ context.Context, key string, now time.Time) (sum string, ok bool, err error) {
	err = s.update(func(set *spawnedSet) (bool, error) {
		var changed bool
		sum, ok, changed = set.takePending(key, now)
		return changed, nil
	})
	if err != nil {
		return "", false, err
	}
	return sum, ok, nil
}
