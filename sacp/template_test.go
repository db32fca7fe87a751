package sacp

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/seed000_template.md is the SACP protocol's own template text,
// copied line for line (it ends with the file's newline, the constant does
// not).
func TestDefaultTemplateIsSeedVerbatim(t *testing.T) {
	b, err := os.ReadFile("testdata/seed000_template.md")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSuffix(string(b), "\n")
	if DefaultTemplate != want {
		t.Errorf("DefaultTemplate differs from the SACP protocol's template:\ngot:\n%s\nwant:\n%s", DefaultTemplate, want)
	}
}

func TestLoadTemplate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	custom := write("custom.md", "Answer in JSON.\n")
	empty := write("empty.md", "")
	binary := write("binary.md", "\xff\xfe")

	tests := []struct {
		name     string
		path     string
		wantText string
		wantErr  string // substring; "" means success
	}{
		{name: "empty path is the default", path: "", wantText: DefaultTemplate},
		{name: "file used byte for byte", path: custom, wantText: "Answer in JSON.\n"},
		{name: "missing file", path: filepath.Join(dir, "nope.md"), wantErr: "nope.md"},
		{name: "empty file", path: empty, wantErr: "empty.md: file is empty"},
		{name: "not utf-8", path: binary, wantErr: "binary.md: file is not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadTemplate(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Text != tt.wantText {
				t.Errorf("Text = %q, want %q", got.Text, tt.wantText)
			}
			sum := sha256.Sum256([]byte(tt.wantText))
			if want := hex.EncodeToString(sum[:]); got.SHA256 != want {
				t.Errorf("SHA256 = %s, want %s", got.SHA256, want)
			}
		})
	}
}

func TestLoadTemplateWrapsCause(t *testing.T) {
	_, err := LoadTemplate(filepath.Join(t.TempDir(), "missing.md"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want it to wrap fs.ErrNotExist", err)
	}
}
