package config

import (
	"os"
	"path/filepath"
	"testing"
)

// TestShippedRegistryValidatesFormatExamples: compact SACP's own example
// messages (compact/testdata/format_examples, one per file) are VALID
// against the registry.yaml the gateway ships, loaded as the gateway loads
// it; so are the benchmark plan and the example answers.
func TestShippedRegistryValidatesFormatExamples(t *testing.T) {
	cfg, err := Load(shippedDir, Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatalf("load the shipped config: %v", err)
	}
	lib, err := cfg.Registry.Library()
	if err != nil {
		t.Fatalf("library of the shipped registry: %v", err)
	}
	const dir = "../../compact/testdata"
	examples, err := filepath.Glob(filepath.Join(dir, "format_examples", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The examples the format's text gives in full must be there: an empty
	// or renamed directory must not pass by validating nothing.
	for _, name := range []string{"section2_hotel.json", "section2_parallel.json", "section6_feedback.json", "appendixD_spawn.json"} {
		if _, err := os.Stat(filepath.Join(dir, "format_examples", name)); err != nil {
			t.Errorf("format example %s: %v", name, err)
		}
	}
	read := func(name string) []byte {
		t.Helper()
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	for _, name := range append(examples, filepath.Join(dir, "bench_20_steps.json")) {
		raw := read(name)
		if r := lib.Validate(raw); !r.Valid() {
			t.Errorf("%s: Validate = %+v, want VALID", filepath.Base(name), r)
		}
		if r := lib.ValidateAnswer(raw); !r.Valid() {
			t.Errorf("%s: ValidateAnswer = %+v, want VALID", filepath.Base(name), r)
		}
	}
	answers, err := filepath.Glob(filepath.Join(dir, "answers", "*.json"))
	if err != nil || len(answers) == 0 {
		t.Fatalf("no example answers: %v", err)
	}
	for _, name := range answers {
		if r := lib.ValidateAnswer(read(name)); !r.Valid() {
			t.Errorf("%s: ValidateAnswer = %+v, want VALID", filepath.Base(name), r)
		}
	}

	// The reference example names its verbs by aliases: what callers
	// compare with agents' supported_verbs is the verbs' names.
	verbs, r := lib.PlanVerbs(read(filepath.Join(dir, "format_examples", "section2_hotel.json")))
	if !r.Valid() || len(verbs) != 3 || verbs[0] != "search" || verbs[1] != "rank" || verbs[2] != "present" {
		t.Errorf("PlanVerbs(section 2) = %q, %+v; want [search rank present]", verbs, r)
	}
}
