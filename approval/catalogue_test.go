package approval

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadShippedCatalogue(t *testing.T) {
	c, err := LoadCatalogue("../config/specs")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"arch-001", "design-001", "docs-001", "req-045", "req-046", "std-001"}
	if !slices.Equal(c.IDs(), want) {
		t.Fatalf("ids %v, want %v", c.IDs(), want)
	}
	s, ok := c.Get("req-045")
	if !ok || s.Title != "Authentication requirements" || s.Path != "req-045.md" || !slices.Contains(s.Tags, "authentication") ||
		!strings.HasPrefix(s.Body, "# Authentication requirements") {
		t.Fatalf("req-045 = %+v", s)
	}
	if _, ok := c.Get("nope"); ok {
		t.Error("Get(nope) found something")
	}
}

func TestCatalogueDuplicateNamesBothFiles(t *testing.T) {
	_, err := LoadCatalogue("testdata/duplicate")
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if !strings.Contains(msg, `duplicate id "arch-001"`) || !strings.Contains(msg, filepath.Join("testdata", "duplicate", "a.md")) ||
		!strings.Contains(msg, filepath.Join("testdata", "duplicate", "sub", "b.md")) {
		t.Fatalf("error %q does not name both files", msg)
	}
}

func TestCatalogueRefusesBadFiles(t *testing.T) {
	cases := []struct{ note, text, want string }{
		{"no front matter", "# Title\n", "no front matter"},
		{"unclosed", "---\nid: x-1\n", "not closed"},
		{"missing id", "---\ntitle: T\n---\n", "id is required"},
		{"bad id", "---\nid: Arch 1\n---\n", "want lowercase"},
		{"unknown key", "---\nid: x-1\nowner: me\n---\n", "owner"},
		{"bad yaml", "---\nid: [\n---\n", "front matter"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "spec.md"), []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadCatalogue(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "spec.md") {
				t.Fatalf("err = %v, want %q naming the file", err, tc.want)
			}
		})
	}
	// Every problem is reported at once.
	dir := t.TempDir()
	for _, n := range []string{"a.md", "b.md"} {
		_ = os.WriteFile(filepath.Join(dir, n), []byte("nothing"), 0o600)
	}
	_ = os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ignored"), 0o600)
	_, err := LoadCatalogue(dir)
	if err == nil || !strings.Contains(err.Error(), "a.md") || !strings.Contains(err.Error(), "b.md") || strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("err = %v", err)
	}
	if _, err := LoadCatalogue(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing directory loaded")
	}
}

func TestCatalogueFrontMatterVariants(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"crlf.md":  "---\r\nid: crlf-1\r\ntitle: Windows\r\n---\r\nBody\r\n",
		"bom.md":   "\ufeff---\nid: bom-1\n---\nBody\n",
		"empty.md": "---\nid: empty-1\ntags:\n  - a\n  - b\n---",
	}
	for n, text := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := LoadCatalogue(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.IDs(), []string{"bom-1", "crlf-1", "empty-1"}) {
		t.Fatalf("ids %v", c.IDs())
	}
	if s, _ := c.Get("empty-1"); !slices.Equal(s.Tags, []string{"a", "b"}) || s.Body != "" {
		t.Errorf("empty-1 = %+v", s)
	}
}

func TestCatalogueSearch(t *testing.T) {
	c, err := LoadCatalogue("../config/specs")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		query string
		first string
	}{
		{"What are the current authentication requirements?", "req-045"},
		{"rate limits per agent", "req-046"},
		{"how do I write a design document", "design-001"},
		{"arch-001", "arch-001"},
		{"Go coding standards and tests", "std-001"},
	}
	for _, tc := range cases {
		got := c.Search(tc.query, 3)
		if len(got) == 0 || got[0].Spec.ID != tc.first {
			var ids []string
			for _, m := range got {
				ids = append(ids, m.Spec.ID)
			}
			t.Errorf("Search(%q) = %v, want %s first", tc.query, ids, tc.first)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Score > got[i-1].Score {
				t.Errorf("Search(%q) not ordered by score", tc.query)
			}
		}
	}
	if got := c.Search("the and of", 5); got != nil {
		t.Errorf("stopwords only: %v", got)
	}
	if got := c.Search("authentication", 0); got != nil {
		t.Errorf("limit 0: %v", got)
	}
	if got := c.Search("requirement", 1); len(got) != 1 {
		t.Errorf("limit 1: %d results", len(got))
	}
}

// A mounted ConfigMap holds every file twice (..data and ..<timestamp>):
// hidden names are skipped, so ids are not seen as duplicates.
func TestCatalogueSkipsHiddenEntries(t *testing.T) {
	dir := t.TempDir()
	spec := "---\nid: arch-001\ntitle: Architecture\n---\nbody\n"
	for _, p := range []string{"..2026_01_01/arch-001.md", "arch-001.md"} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := LoadCatalogue(dir)
	if err != nil || c.Len() != 1 {
		t.Fatalf("catalogue with a hidden copy: %v, %d specs", err, c.Len())
	}
}
