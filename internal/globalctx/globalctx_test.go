package globalctx

import (
	"strings"
	"testing"
)

// TestSeed003StateMutabilityOwnerWriteOnly: seed 003 §3.2 rule 1, only the
// owner writes an entity; a write of an entity it does not own, or entities
// that are not an object, is refused whole.
func TestSeed003StateMutabilityOwnerWriteOnly(t *testing.T) {
	vendor := map[string]any{"id": "v-123", "name": "Acme Corp", "status": "pending_validation"}
	w, err := Writes("agent vendor_agent", []string{"vendor"}, map[string]any{"entities": map[string]any{"vendor": vendor}})
	if err != nil || w["vendor"] == nil {
		t.Fatalf("owner's write: %v %v", w, err)
	}
	var c Context[string]
	c.Apply(w)
	if c.Entities["vendor"] == nil {
		t.Errorf("entities after the write: %v", c.Entities)
	}
	if _, err := Writes("agent vendor_agent", []string{"vendor"}, map[string]any{"entities": map[string]any{"vendor": vendor, "requisition": nil}}); err == nil ||
		!strings.Contains(err.Error(), `wrote entity "requisition", which it does not own (owns: vendor)`) {
		t.Errorf("write of another's entity: %v", err)
	}
	if _, err := Writes("x", nil, map[string]any{"entities": []any{}}); err == nil {
		t.Error("entities as a list accepted")
	}
	if w, err := Writes("x", nil, map[string]any{"data": 1}); w != nil || err != nil {
		t.Errorf("no entities: %v %v", w, err)
	}
}
