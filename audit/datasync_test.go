package audit

import (
	"os"
	"path/filepath"
	"testing"
)

// datasync reports a sync that fails (here: on a closed segment) rather
// than acknowledging entries that are not durable.
func TestDatasyncReportsFailure(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("line\n"); err != nil {
		t.Fatal(err)
	}
	if err := datasync(f); err != nil {
		t.Fatalf("datasync of a written segment: %v", err)
	}
	_ = f.Close()
	if err := datasync(f); err == nil {
		t.Fatal("datasync of a closed segment succeeded")
	}
}
