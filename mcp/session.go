package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// Session is one agent's MCP session through the gateway: the id the
// gateway gave the agent, mapped to the server's own session. An agent
// only ever holds the gateway's id; the server's never leaves the gateway.
type Session struct {
	// ID is the Mcp-Session-Id the gateway issued to the agent.
	ID string
	// Agent and Server are whose session it is and where it leads: a
	// request carrying the id for another agent or server is refused as if
	// the session did not exist.
	Agent, Server string
	// Upstream is the server's Mcp-Session-Id ("" when it keeps none).
	Upstream string
	// Protocol is the protocol version the server negotiated.
	Protocol string
	// Target is the server's URL when the session opened: a reload that
	// moves the server ends its sessions (the old server's ids mean
	// nothing to the new one).
	Target string
	// Members are a virtual server's sessions with its servers, by name
	// (nil for any other server's session).
	Members map[string]Member
	// CursorKey signs the cursors a virtual server's listings issue in
	// this session, so that one not issued here is refused ("" for any
	// other server's session).
	CursorKey string
}

// Member is a virtual server's session with one of its servers.
type Member struct {
	Upstream string `json:"upstream,omitempty"`
	Protocol string `json:"protocol"`
}

// Sessions keeps the gateway's MCP sessions. Get reports a session that
// does not exist (or expired) as ok false.
type Sessions interface {
	Put(ctx context.Context, s Session) error
	Get(ctx context.Context, id string) (s Session, ok bool, err error)
	Delete(ctx context.Context, id string) error
}

// Bounds of the sessions (RedisSessions' defaults too).
const (
	// sessionIdle ends a session unused this long (the server's own
	// session may live on; the agent initializes again).
	sessionIdle = time.Hour
	// sessionsPerAgent bounds one agent's sessions: a new one beyond it
	// ends the agent's least recently used.
	sessionsPerAgent = 64
)

// MemorySessions keeps sessions in this process: an agent must reach the
// same replica for one session (sticky routing); RedisSessions
// (state.backend redis) shares them between replicas.
type MemorySessions struct {
	mu   sync.Mutex
	byID map[string]*memSession
	now  func() time.Time
}

type memSession struct {
	s    Session
	used time.Time
}

var _ Sessions = (*MemorySessions)(nil)

// NewMemorySessions returns an empty store.
func NewMemorySessions() *MemorySessions {
	return &MemorySessions{byID: map[string]*memSession{}, now: time.Now}
}

// Put implements Sessions.
func (m *MemorySessions) Put(_ context.Context, s Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var oldest *memSession
	n := 0
	for id, e := range m.byID {
		if now.Sub(e.used) > sessionIdle {
			delete(m.byID, id)
			continue
		}
		if e.s.Agent == s.Agent {
			n++
			if oldest == nil || e.used.Before(oldest.used) {
				oldest = e
			}
		}
	}
	if n >= sessionsPerAgent && oldest != nil {
		delete(m.byID, oldest.s.ID)
	}
	m.byID[s.ID] = &memSession{s: s, used: now}
	return nil
}

// Get implements Sessions; a session found is marked used.
func (m *MemorySessions) Get(_ context.Context, id string) (Session, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byID[id]
	now := m.now()
	if e == nil || now.Sub(e.used) > sessionIdle {
		delete(m.byID, id)
		return Session{}, false, nil
	}
	e.used = now
	return e.s, true, nil
}

// Delete implements Sessions.
func (m *MemorySessions) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byID, id)
	return nil
}

// newSessionID is an unguessable session id: 16 random bytes, hex, with a
// prefix that tells it from a server's.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "mcp-" + hex.EncodeToString(b[:])
}
