package audit

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestKindsAreDocumented holds the kinds table of docs/compliance.md §2 to
// Kinds: the kinds --kind accepts are the ones an auditor can read about.
func TestKindsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/compliance.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "Kinds and their `summary`:")
	if !ok {
		t.Fatal("docs/compliance.md has no kinds table")
	}
	table, _, _ = strings.Cut(strings.TrimSpace(table), "\n\n")
	name := regexp.MustCompile("`([a-z0-9_]+\\.[a-z0-9_.]+)`")
	var documented []string
	for _, row := range strings.Split(table, "\n")[2:] {
		first := strings.Split(row, "|")[1] // the kind column
		for _, m := range name.FindAllStringSubmatch(first, -1) {
			documented = append(documented, m[1])
		}
	}
	slices.Sort(documented)
	if want := Kinds(); !slices.Equal(documented, want) {
		t.Errorf("documented kinds\n%v\nKinds()\n%v", documented, want)
	}
}

func TestKnownKind(t *testing.T) {
	for k, want := range map[string]bool{
		"llm.request": true, "llm.*": true, "workflow.*": true, "*": true, "mcp.call": true,
		"llm.requst": false, "llm": false, "lm.*": false, "": false,
	} {
		if KnownKind(k) != want {
			t.Errorf("KnownKind(%q) = %v", k, !want)
		}
	}
}
