package archtest

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// loader is the configuration loader: it composes the parts' own config
// types, so it may know the parts below the doors and nothing above them.
const loader = "internal/config"

// deps lists, with go list, every module package's transitive non-test
// dependencies inside the module (module prefix trimmed). The transitive
// list, not the direct imports, is what the rules below are about: a part
// that reaches a door through a package in between depends on it as much.
func deps(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		var own []string
		for _, d := range fields[1:] {
			if strings.HasPrefix(d, module) {
				own = append(own, strings.TrimPrefix(d, module))
			}
		}
		graph[strings.TrimPrefix(fields[0], module)] = own
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading go list: %v", err)
	}
	return graph
}

// loaderProblems: every package the loader depends on is of a layer no
// higher than its own, so the doors, the shell, the wiring and the
// command (and the door frame and plumbing under the doors) stay out of
// it; a door's settings reach the loader only as a type of a part below.
func loaderProblems(graph map[string][]string) []string {
	own, ok := layers[loader]
	if _, listed := graph[loader]; !ok || !listed {
		return []string{fmt.Sprintf("the loader %s is not listed or has no layer", loader)}
	}
	var problems []string
	for _, dep := range graph[loader] {
		layer, ok := layers[dep]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("the loader depends on %s, which has no layer", dep))
		case layer > own:
			problems = append(problems, fmt.Sprintf("the loader (layer %d) depends on %s (layer %d%s): the part owns its settings' type below the loader, or the loader does not know them", own, dep, layer, doorNote(dep)))
		}
	}
	return problems
}

// shellProblems: the HTTP shell depends on no door's package, directly or
// through another package.
func shellProblems(graph map[string][]string) []string {
	if _, ok := graph["server"]; !ok {
		return []string{"server is not listed"}
	}
	var problems []string
	for _, dep := range graph["server"] {
		if d := doors[dep]; d != "" {
			problems = append(problems, fmt.Sprintf("server depends on %s, a package of the %s door: mount its routes through internal/door instead", dep, d))
		}
	}
	return problems
}

// unclaimedDoors: every package of the doors' layer (by layerOf) belongs
// to a door in doors, so a new door cannot pass the rule below unchecked.
func unclaimedDoors(graph map[string][]string, layerOf map[string]int) []string {
	var problems []string
	for _, pkg := range slices.Sorted(maps.Keys(graph)) {
		if layer, ok := layerOf[pkg]; ok && layer == layerOf["proxy"] && doors[pkg] == "" {
			problems = append(problems, fmt.Sprintf("%s is of the doors' layer but of no door: add it to doors", pkg))
		}
	}
	return problems
}

// doorProblems: no door's package depends on another door's, directly or
// through another package.
func doorProblems(graph map[string][]string) []string {
	var problems []string
	for _, pkg := range slices.Sorted(maps.Keys(graph)) {
		d1 := doors[pkg]
		if d1 == "" {
			continue
		}
		for _, dep := range graph[pkg] {
			if d2 := doors[dep]; d2 != "" && d2 != d1 {
				problems = append(problems, fmt.Sprintf("%s (%s door) depends on %s (%s door): the doors share plumbing, not each other", pkg, d1, dep, d2))
			}
		}
	}
	return problems
}

func doorNote(pkg string) string {
	if d := doors[pkg]; d != "" {
		return ", of the " + d + " door"
	}
	return ""
}

// TestDependencyRules holds the module's real dependency graph to the
// three rules: the loader knows no part above it, the shell no door, and
// no door another.
func TestDependencyRules(t *testing.T) {
	graph := deps(t)
	for _, p := range loaderProblems(graph) {
		t.Error(p)
	}
	for _, p := range shellProblems(graph) {
		t.Error(p)
	}
	for _, p := range doorProblems(graph) {
		t.Error(p)
	}
	for _, p := range unclaimedDoors(graph, layers) {
		t.Error(p)
	}
}

// TestDependencyRulesCatch: each rule finds a breach that reaches across
// only through a package in between (which the direct-import check of
// TestImportFlow cannot see), so the rules above can fail.
func TestDependencyRulesCatch(t *testing.T) {
	graph := map[string][]string{
		// The loader reaching the approval door and the wiring through
		// a part in between.
		loader:   {"internal/confkit", "upstream", "approval", "app"},
		"server": {"internal/door", "internal/httpx", "messaging"},
		// The workflow door reaching the relay's mailbox.
		"workflow": {"internal/door", "internal/escalation", "mailbox"},
		"proxy":    {"internal/door"},
	}
	cases := []struct {
		name  string
		check func(map[string][]string) []string
		want  []string
	}{
		{"loader", loaderProblems, []string{"depends on approval (layer 4, of the approval door)", "depends on app (layer 6)"}},
		{"shell", shellProblems, []string{"server depends on messaging, a package of the relay door"}},
		{"doors", doorProblems, []string{"workflow (workflow door) depends on mailbox (relay door)"}},
	}
	for _, c := range cases {
		got := strings.Join(c.check(graph), "\n")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: problems %q do not say %q", c.name, got, w)
			}
		}
	}
	clean := map[string][]string{loader: {"internal/confkit", "upstream"}, "server": {"internal/door"}, "proxy": {"internal/door"}}
	for _, c := range cases {
		if p := c.check(clean); len(p) != 0 {
			t.Errorf("%s: a clean graph has problems: %q", c.name, p)
		}
	}
	// A new package in the doors' layer that no door claims.
	withNew := maps.Clone(layers)
	withNew["newdoor"] = layers["proxy"]
	p := strings.Join(unclaimedDoors(map[string][]string{"newdoor": {"internal/door"}, "proxy": nil}, withNew), "\n")
	if !strings.Contains(p, "newdoor is of the doors' layer but of no door") {
		t.Errorf("a door-layer package outside doors passes: %q", p)
	}
	if p := unclaimedDoors(clean, layers); len(p) != 0 {
		t.Errorf("a clean graph has unclaimed doors: %q", p)
	}
}
