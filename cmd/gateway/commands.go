package main

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
)

// command is one line of the command table: the help, the completion
// scripts and the dispatch all read it, so none of them can list a command
// the others do not know.
type command struct {
	// path is the command's words: "serve", "config check".
	path string
	// args is the synopsis after the path.
	args string
	// summary is the one-line description.
	summary string
	// findConfig: when --config is not given, the dispatch passes the
	// configuration directory the search finds, if any (configdir.go);
	// without one the command keeps its own fallback. Commands that need a
	// configuration search themselves, after their flags parsed.
	findConfig bool
	// run runs the command with the arguments after its path.
	run func(args []string, stdout, stderr io.Writer) int
}

// commands is the command table, in the order help lists it.
func commands() []command {
	return []command{
		{path: "serve", args: "[--config DIR] [--listen ADDR] [--sidecar-agent ID]", run: func(args []string, _, stderr io.Writer) int { return serveMain(args, stderr) },
			summary: "run the gateway (also what plain `gateway` does)"},
		{path: "init", args: "[DIR]", run: initMain,
			summary: "write a working configuration directory (default config) with fresh tokens and the shipped policies"},
		{path: "config check", args: "[--config DIR] [--explain]", run: checkMain,
			summary: "validate the configuration and policies; every problem as file:line: message"},
		{path: "audit verify", args: "[--config DIR | --dir D | --export FILE [--manifest M] | --from s3://BUCKET/PREFIX] [--pubkey FILE]... [--json]", findConfig: true, run: auditVerify,
			summary: "recompute the audit chain and check its checkpoints"},
		{path: "audit export", args: "[--config DIR | --dir D | --from s3://BUCKET/PREFIX] --format jsonl|csv [--since T] [--until T] [--agent ID] [--kind K] [--pubkey FILE]... --out FILE|-", findConfig: true, run: auditExport,
			summary: "write selected audit entries and a manifest an auditor can check"},
		{path: "audit keygen", args: "--out PREFIX | --private FILE --public FILE", run: auditKeygen,
			summary: "make an ed25519 key pair for signed audit checkpoints"},
		{path: "audit prove", args: "[--config DIR | --dir D] [--chain C] --seq N [--checkpoint FILE] [--out FILE|-] | --consistency OLD NEW", findConfig: true, run: auditProve,
			summary: "write the inclusion proof of one entry (c2sp.org/tlog-proof), or the consistency proof of two checkpoints"},
		{path: "audit checkpoint", args: "[--config DIR | --dir D] [--chain C] [--size N] [--out FILE|-]", findConfig: true, run: auditCheckpoint,
			summary: "print a chain's signed checkpoint note (C2SP), the latest or of tree size N"},
		{path: "audit verify-proof", args: "--pubkey FILE [--pubkey FILE]... [--json] PROOF", run: auditVerifyProof,
			summary: "check an inclusion or consistency proof with only the public key"},
		{path: "policy test", args: "[--config DIR] [-run REGEX] [-v] [--timeout D] [POLICYDIR]", findConfig: true, run: sub(policyMain, "test"),
			summary: "run the Rego unit tests of the policy directory, as opa test does"},
		{path: "workflow graph", args: "NAME [--config DIR]", run: sub(workflowMain, "graph"),
			summary: "print a workflow as a Mermaid diagram"},
		{path: "agents list", args: "[--json] [--url URL] [--token T]", run: agentsMain("list"),
			summary: "list the agents you may manage through a running gateway's admin API"},
		{path: "agents create", args: "NAME [--set key=value]... [--url URL] [--token T]", run: agentsMain("create"),
			summary: "create an agent at run time, with the fields of an agents.yaml entry"},
		{path: "agents update", args: "NAME [--set key=value]... [--url URL] [--token T]", run: agentsMain("update"),
			summary: "change fields of a run-time agent (key=null removes one)"},
		{path: "agents disable", args: "NAME [--url URL] [--token T]", run: agentsMain("disable"),
			summary: "refuse a run-time agent's keys until it is enabled again"},
		{path: "agents enable", args: "NAME [--url URL] [--token T]", run: agentsMain("enable"),
			summary: "accept a disabled run-time agent's keys again"},
		{path: "agents delete", args: "NAME [--url URL] [--token T]", run: agentsMain("delete"),
			summary: "delete a run-time agent and its keys"},
		{path: "keys list", args: "AGENT [--url URL] [--token T]", run: keysMain("list"),
			summary: "list an agent's keys: id, creation, expiry, last use (never the keys)"},
		{path: "keys issue", args: "AGENT [--expires-in DURATION] [--url URL] [--token T]", run: keysMain("issue"),
			summary: "issue a key for an agent; printed once, stored hashed"},
		{path: "keys revoke", args: "AGENT KEY_ID [--url URL] [--token T]", run: keysMain("revoke"),
			summary: "revoke a key, at once on every replica"},
		{path: "completion", args: "bash|zsh|fish", run: completionMain,
			summary: "print a shell completion script"},
		{path: "version", run: versionMain,
			summary: "print the version, commit and Go version"},
		{path: "help", args: "[COMMAND]", run: helpMain,
			summary: "explain a command and its flags"},
	}
}

// sub runs a command group's main with its subcommand in front, as the
// group's own dispatch expects.
func sub(main func([]string, io.Writer, io.Writer) int, name string) func([]string, io.Writer, io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		return main(append([]string{name}, args...), stdout, stderr)
	}
}

// lookup finds the command that args start with; rest is what follows
// its path.
func lookup(args []string) (command, []string, bool) {
	for _, c := range commands() {
		words := strings.Fields(c.path)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return c, args[len(words):], true
		}
	}
	return command{}, nil, false
}

// group is the commands under a first word ("audit"), nil if none.
func group(word string) []command {
	var out []command
	for _, c := range commands() {
		if first, _, ok := strings.Cut(c.path, " "); ok && first == word {
			out = append(out, c)
		}
	}
	return out
}

// dispatch runs the command args name. Without a command, or with flags
// first, it serves: "gateway --config DIR" is "gateway serve --config DIR".
func dispatch(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0 || (strings.HasPrefix(args[0], "-") && !isHelp(args[0]) && !isVersion(args[0])):
		args = append([]string{"serve"}, args...)
	case isHelp(args[0]):
		usage(stdout)
		return exitOK
	case isVersion(args[0]):
		args[0] = "version"
	}
	c, rest, ok := lookup(args)
	if !ok {
		return unknown(args, stdout, stderr)
	}
	if slices.ContainsFunc(beforeDashes(rest), isHelp) {
		commandHelp(stdout, c)
		return exitOK
	}
	if c.findConfig && !hasFlag(rest, "config") {
		if dir, err := defaultConfigSearch().find(); err == nil {
			rest = append([]string{"--config", dir}, rest...)
		}
	}
	return c.run(rest, stdout, stderr)
}

// unknown answers a first word that is no command: a group's list of
// subcommands, or the list of commands. The audit group passes words it
// does not know to its own dispatch, which may know more.
func unknown(args []string, stdout, stderr io.Writer) int {
	cs := group(args[0])
	if cs == nil {
		fmt.Fprintf(stderr, "gateway: unknown command %q (run gateway --help for the list)\n", args[0])
		return exitUsage
	}
	if len(args) > 1 && isHelp(args[1]) {
		groupHelp(stdout, args[0], cs)
		return exitOK
	}
	if len(args) > 1 && args[0] == "audit" {
		return auditMain(args[1:], stdout, stderr)
	}
	if len(args) > 1 {
		fmt.Fprintf(stderr, "gateway %s: unknown command %q\n", args[0], args[1])
	}
	groupHelp(stderr, args[0], cs)
	return exitUsage
}

func isHelp(a string) bool    { return a == "-h" || a == "-help" || a == "--help" }
func isVersion(a string) bool { return a == "-version" || a == "--version" }

func beforeDashes(args []string) []string {
	if i := slices.Index(args, "--"); i >= 0 {
		return args[:i]
	}
	return args
}

// usage is "gateway --help": every command with its one-line summary.
func usage(w io.Writer) {
	fmt.Fprint(w, "gateway: the governance gateway for AI agents' LLM and tool traffic\n\nusage: gateway [COMMAND] [FLAGS]   (no command: serve)\n\ncommands:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.path, c.summary)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, `
The configuration directory is --config DIR, else $%s, else the first of
./config, ~/.config/gateway and %s that holds gateway.yaml.
Run "gateway COMMAND --help" for a command's flags.
Exit codes: 0 ok, 1 a check failed, 2 usage or configuration error.
`, configEnv, systemConfigDir)
}

func groupHelp(w io.Writer, name string, cs []command) {
	fmt.Fprintf(w, "usage: gateway %s COMMAND [FLAGS]\n\ncommands:\n", name)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, c := range cs {
		fmt.Fprintf(tw, "  %s\t%s\n", c.path, c.summary)
	}
	_ = tw.Flush()
}

// commandHelp is "gateway COMMAND --help": the synopsis, the summary and
// each flag with its description.
func commandHelp(w io.Writer, c command) {
	fmt.Fprintf(w, "usage: gateway %s %s\n\n%s\n", c.path, c.args, c.summary)
	if defaults := flagDefaults(c); defaults != "" {
		fmt.Fprintf(w, "\nflags:\n%s", defaults)
	}
}

// flagDefaults is the flag package's description of c's flags, read from
// the command itself (its -help), so help and completion stay what the
// command really parses.
func flagDefaults(c command) string {
	var errb bytes.Buffer
	c.run([]string{"-help"}, io.Discard, &errb)
	var b strings.Builder
	for line := range strings.Lines(errb.String()) {
		if strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "\t") {
			b.WriteString(line)
		}
	}
	return b.String()
}

type flagInfo struct {
	name    string
	value   bool // takes a value (not a bool flag)
	summary string
}

var flagLine = regexp.MustCompile(`^  -(\S+)(?: (\S+))?`)

// flagsOf lists c's flags from flagDefaults.
func flagsOf(c command) []flagInfo {
	var out []flagInfo
	lines := strings.Split(flagDefaults(c), "\n")
	for i, line := range lines {
		m := flagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := flagInfo{name: m[1], value: m[2] != ""}
		// The description follows on the next line (tab-indented), or on
		// the same line after a tab for one-letter flags.
		if _, desc, ok := strings.Cut(line, "\t"); ok {
			f.summary = strings.TrimSpace(desc)
		} else if i+1 < len(lines) {
			f.summary = strings.TrimSpace(lines[i+1])
		}
		out = append(out, f)
	}
	return out
}

// helpMain is "gateway help [COMMAND]".
func helpMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return exitOK
	}
	if c, rest, ok := lookup(args); ok && len(rest) == 0 {
		commandHelp(stdout, c)
		return exitOK
	}
	if cs := group(args[0]); cs != nil && len(args) == 1 {
		groupHelp(stdout, args[0], cs)
		return exitOK
	}
	fmt.Fprintf(stderr, "gateway help: unknown command %q (run gateway --help for the list)\n", strings.Join(args, " "))
	return exitUsage
}
