package audit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReplaceFile: the cursors the shipper and the SIEM stream keep are
// replaced whole, and a failed replacement leaves no temporary file behind
// and the old cursor in place.
func TestReplaceFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cursor")
	for _, want := range []string{`{"seq":1}`, `{"seq":2}`} {
		if err := ReplaceFile(path, []byte(want)); err != nil {
			t.Fatalf("ReplaceFile: %v", err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Fatalf("file holds %q (%v), want %q", got, err, want)
		}
	}
	// A directory where the temporary file must go: the write fails.
	if err := os.Mkdir(path+".tmp", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path+".tmp", "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceFile(path, []byte(`{"seq":3}`)); err == nil {
		t.Fatal("ReplaceFile over a blocked temporary path succeeded")
	}
	if got, _ := os.ReadFile(path); string(got) != `{"seq":2}` {
		t.Errorf("after a failed replacement the file holds %q, want the old cursor", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 { // cursor and the blocking directory, nothing new
		t.Errorf("directory holds %d entries, want 2", len(entries))
	}
}
