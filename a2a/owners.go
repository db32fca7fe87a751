package a2a

import (
	"strings"
	"sync"
)

// maxOwned bounds the tasks and contexts remembered: past it, the oldest
// is forgotten, and its task is then no one's (its caller is told there
// is no such task: failing closed, never open).
const maxOwned = 200_000

// owners remembers which caller each task and context of an agent
// belongs to: a task is visible only to the agent whose message started
// it. Kept in this process.
type owners struct {
	mu    sync.Mutex
	by    map[string]string
	order []string
}

func newOwners() *owners { return &owners{by: map[string]string{}} }

func ownerKey(kind, agent, id string) string { return kind + "\x00" + agent + "\x00" + id }

// claim makes caller the owner of kind id at agent unless another caller
// owns it; it reports whether caller owns it now. An empty id is no one's
// and always claimed.
func (o *owners) claim(kind, agent, id, caller string) bool {
	if id == "" {
		return true
	}
	k := ownerKey(kind, agent, id)
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, ok := o.by[k]; ok {
		return cur == caller
	}
	if len(o.order) >= maxOwned {
		delete(o.by, o.order[0])
		o.order = o.order[1:]
	}
	o.by[k] = caller
	o.order = append(o.order, k)
	return true
}

// owns reports whether caller owns kind id at agent (an id never claimed
// is no one's).
func (o *owners) owns(kind, agent, id, caller string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	cur, ok := o.by[ownerKey(kind, agent, id)]
	return ok && cur == caller
}

// free reports whether no caller but caller owns kind id at agent.
func (o *owners) free(kind, agent, id, caller string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	cur, ok := o.by[ownerKey(kind, agent, id)]
	return !ok || cur == caller
}

// list is the ids of kind at agent that caller owns, oldest first.
func (o *owners) list(kind, agent, caller string) []string {
	prefix := ownerKey(kind, agent, "")
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, k := range o.order {
		if id, ok := strings.CutPrefix(k, prefix); ok && o.by[k] == caller {
			out = append(out, id)
		}
	}
	return out
}
