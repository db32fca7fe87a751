// Package globalctx is the Global Context a conversation of agents shares:
// entities each written only by its owner, a history only the gateway
// appends to, and artifacts by reference. Workflow runs and relay threads
// keep one each, in the same shape and under the same write rule.
package globalctx

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Context is the Global Context; S is the type of its status (a workflow
// run's Status, or a plain string).
type Context[S ~string] struct {
	WorkflowID   string         `json:"workflow_id"`
	Status       S              `json:"status"`
	CurrentAgent string         `json:"current_agent"`
	Entities     map[string]any `json:"entities"`
	History      []HistoryEntry `json:"history"`
	Artifacts    []Artifact     `json:"artifacts"`
}

// HistoryEntry is one thing an agent did; Node is the workflow node, empty
// in a relay thread.
type HistoryEntry struct {
	Agent     string    `json:"agent"`
	Node      string    `json:"node,omitempty"`
	Action    string    `json:"action"`
	Timestamp time.Time `json:"timestamp"`
}

// Artifact is a document the conversation produced, by reference.
type Artifact struct {
	Type      string `json:"type"`
	URL       string `json:"url"`
	Node      string `json:"node"`
	MediaType string `json:"media_type,omitempty"`
	Size      int    `json:"size,omitempty"`
}

// Writes returns the entity writes in holder["entities"], checked: who
// (a node, an agent) writes only the entities it owns. No "entities"
// member is no write; one that is not an object is an error.
func Writes(who string, owns []string, holder map[string]any) (map[string]any, error) {
	raw, ok := holder["entities"]
	if !ok {
		return nil, nil
	}
	ents, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("entities must be an object of entity name to value")
	}
	for _, name := range slices.Sorted(maps.Keys(ents)) {
		if !slices.Contains(owns, name) {
			return nil, fmt.Errorf("%s wrote entity %q, which it does not own (owns: %s)", who, name, strings.Join(owns, ", "))
		}
	}
	return ents, nil
}

// Apply sets the checked writes on c's entities.
func (c *Context[S]) Apply(writes map[string]any) {
	if len(writes) > 0 && c.Entities == nil {
		c.Entities = map[string]any{}
	}
	maps.Copy(c.Entities, writes)
}
