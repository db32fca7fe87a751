package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/mcp"
	"github.com/sacpgw/gateway/messaging"
	"github.com/sacpgw/gateway/oauthserver"
	"github.com/sacpgw/gateway/registry"
	"github.com/sacpgw/gateway/workflow"
)

// TestAuditVerifyExport is the auditor's side: an export handed over with
// its manifest verifies with the public key, and a changed line, a
// changed manifest or the wrong key fails, naming where.
func TestAuditVerifyExport(t *testing.T) {
	dir := t.TempDir()
	prefix := writeChain(t, dir, 6)
	other, _ := keyOf(t)
	out := filepath.Join(t.TempDir(), "export.jsonl")
	if code, _, stderr := runAudit("export", "--dir", dir, "--format", "jsonl", "--out", out); code != 0 {
		t.Fatalf("export: %d %s", code, stderr)
	}
	tampered := filepath.Join(t.TempDir(), "export.jsonl")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, tampered, bytes.Replace(data, []byte(`"total":2`), []byte(`"total":9`), 1))
	writeTestFile(t, tampered+".manifest.json", must(os.ReadFile(out+".manifest.json")))
	badManifest := filepath.Join(t.TempDir(), "m.json")
	writeTestFile(t, badManifest, bytes.Replace(must(os.ReadFile(out+".manifest.json")), []byte(`"count": 6`), []byte(`"count": 7`), 1))
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"whole", []string{"verify", "--export", out, "--pubkey", prefix + ".pub"}, 0,
			"ok: export.jsonl matches its manifest: 6 entries (jsonl, sha256 ", ""},
		{"whole, what it ties", []string{"verify", "--export", out, "--pubkey", prefix + ".pub"}, 0,
			"gw-1: seq 1 to 6, every link checked, checkpoint seq 6 in the export, signature ok (key id ", ""},
		{"without a key", []string{"verify", "--export", out}, 0, "signature not checked (no --pubkey)", ""},
		{"json", []string{"verify", "--export", out, "--json"}, 0, `"checkpoint_in_export": true`, ""},
		{"changed entry", []string{"verify", "--export", tampered, "--pubkey", prefix + ".pub"}, 1, "",
			"FAILED: export.jsonl line 3 (seq 3): hash mismatch"},
		{"changed manifest", []string{"verify", "--export", out, "--manifest", badManifest}, 1, "",
			"FAILED: export.jsonl: after line 6, the end of the file: 6 entries, the manifest says count 7"},
		{"wrong key", []string{"verify", "--export", out, "--pubkey", other + ".pub"}, 1, "",
			"FAILED: export.jsonl.manifest.json: chain \"gw-1\": latest_checkpoint: signed with unknown key id "},
		{"no such export", []string{"verify", "--export", out + ".nope"}, 2, "", "--export " + out + ".nope: no such file"},
		{"no manifest", []string{"verify", "--export", out, "--manifest", badManifest + ".nope"}, 2, "", "--manifest " + badManifest + ".nope: no such file"},
		{"export and dir", []string{"verify", "--export", out, "--dir", dir}, 2, "", "either --export or --dir"},
		{"manifest alone", []string{"verify", "--dir", dir, "--manifest", badManifest}, 2, "", "--manifest goes with --export"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q\nwant exit %d, stdout ~%q, stderr ~%q", code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// TestAuditExportKindTypo: a misspelt kind is a usage error naming the
// kind meant, not an empty export with exit 0.
func TestAuditExportKindTypo(t *testing.T) {
	dir := t.TempDir()
	writeChain(t, dir, 2)
	out := filepath.Join(t.TempDir(), "x.jsonl")
	code, _, stderr := runAudit("export", "--dir", dir, "--format", "jsonl", "--kind", "llm.requst", "--out", out)
	if code != 2 || !strings.Contains(stderr, `--kind "llm.requst": the gateway writes no such kind (did you mean "llm.request"?)`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("an export was written")
	}
	for kind, hint := range map[string]string{"lm.*": `(did you mean "llm.*"?)`, "nothing.at.all": "the kinds are agent.decision, "} {
		if code, _, stderr := runAudit("export", "--dir", dir, "--format", "jsonl", "--kind", kind, "--out", out); code != 2 || !strings.Contains(stderr, hint) {
			t.Errorf("--kind %s: exit %d, stderr %q; want %q", kind, code, stderr, hint)
		}
	}
	for _, kind := range []string{"llm.request", "llm.*", "workflow.*", "*"} {
		if code, _, stderr := runAudit("export", "--dir", dir, "--format", "jsonl", "--kind", kind, "--out", out); code != 0 {
			t.Errorf("--kind %s: exit %d, %s", kind, code, stderr)
		}
	}
}

// TestKindsListsEveryWriter holds the packages that write their own kinds
// to audit's one list, so --kind knows every kind the gateway writes.
func TestKindsListsEveryWriter(t *testing.T) {
	for _, k := range []string{
		messaging.KindMessage, messaging.KindMessageResponse, messaging.KindMessageDelivery, messaging.KindMessageReject,
		messaging.KindMessageEscalation, messaging.KindMessageRead,
		registry.KindSpawn, registry.KindRetire,
		workflow.KindStart, workflow.KindStep, workflow.KindSuspend, workflow.KindResume, workflow.KindEnd,
		mcp.KindCall, mcp.KindResult,
		oauthserver.KindRegister, oauthserver.KindGrant, oauthserver.KindToken, oauthserver.KindRefuse,
	} {
		if !slices.Contains(audit.Kinds(), k) {
			t.Errorf("kind %q is written but not in audit.Kinds", k)
		}
	}
}

// TestAuditExportSinceFromCheckpoint: with the key, an export of a recent
// window verifies from the last signed checkpoint before it, says so, and
// the auditor's check of it passes.
func TestAuditExportSinceFromCheckpoint(t *testing.T) {
	dir := t.TempDir()
	key, _ := keyOf(t)
	writeLife(t, dir, key, 5) // checkpoint at 5
	time.Sleep(2 * time.Millisecond)
	since := time.Now().UTC().Format(time.RFC3339Nano)
	writeLife(t, dir, key, 3) // checkpoint at 8
	out := filepath.Join(t.TempDir(), "w.jsonl")
	code, stdout, stderr := runAudit("export", "--dir", dir, "--format", "jsonl", "--since", since, "--pubkey", key+".pub", "--out", out)
	if want := "verified gw-1 from signed checkpoint seq 5 (4 entries, signatures checked)"; code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
	}
	if !strings.Contains(stdout, "exported 3 entries") {
		t.Errorf("stdout %q: want the 3 entries of the window", stdout)
	}
	code, stdout, stderr = runAudit("verify", "--export", out, "--pubkey", key+".pub")
	if want := "the gateway verified the chain from checkpoint seq 5"; code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("verify --export: exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
	}
	code, stdout, _ = runAudit("export", "--dir", dir, "--format", "jsonl", "--since", since, "--out", out)
	if want := "verified gw-1 from seq 1 (8 entries, signatures not checked) (with --pubkey, --since verifies from the last signed checkpoint before it)"; code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("without a key: exit %d, stdout %q; want %q", code, stdout, want)
	}
}

// TestAuditQuietWithoutTerminal: when stderr is a file, not a terminal,
// verify and export print their summary and nothing else, on stdout.
func TestAuditQuietWithoutTerminal(t *testing.T) {
	dir := t.TempDir()
	writeChain(t, dir, 3) // progress is reported at each file, so there would be some
	out := filepath.Join(t.TempDir(), "x.jsonl")
	for _, args := range [][]string{
		{"verify", "--dir", dir},
		{"export", "--dir", dir, "--format", "jsonl", "--out", out},
		{"verify", "--export", out},
	} {
		stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
		if err != nil {
			t.Fatal(err)
		}
		var stdout bytes.Buffer
		code := auditMain(args, &stdout, stderr)
		_ = stderr.Close()
		errOut := must(os.ReadFile(stderr.Name()))
		if code != 0 || len(errOut) > 0 || strings.Count(stdout.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want only the summary line", args, code, errOut, stdout.String())
		}
	}
}

// TestProgressLine: on a terminal, the line shows the stage, the entries,
// the rate and the file, is rewritten in place, and is erased at the end.
func TestProgressLine(t *testing.T) {
	var buf bytes.Buffer
	p := &progressLine{w: &buf}
	p.report(audit.Progress{Stage: "verify", Chain: "gw-1", File: "gw-1-00000000000000000001.jsonl", Entries: 4096})
	p.report(audit.Progress{Stage: "verify", Chain: "gw-1", File: "gw-1-00000000000000000001.jsonl", Entries: 8192}) // too soon: skipped
	p.report(audit.Progress{Stage: "export", Chain: "gw-1", File: "gw-1-00000000000000000001.jsonl", Entries: 10})
	p.done()
	got := buf.String()
	for _, want := range []string{"\r\x1b[Kverify: 4096 entries, ", " entries/s, gw-1 gw-1-00000000000000000001.jsonl", "\r\x1b[Kexport: 10 entries"} {
		if !strings.Contains(got, want) {
			t.Errorf("progress %q: want %q", got, want)
		}
	}
	if strings.Contains(got, "8192") || !strings.HasSuffix(got, "\r\x1b[K") {
		t.Errorf("progress %q: want the early report skipped and the line erased at the end", got)
	}
	if progressFor(&buf) != nil {
		t.Error("a buffer is not a terminal")
	}
}

func writeTestFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
