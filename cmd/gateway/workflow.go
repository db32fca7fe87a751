package main

import (
	"fmt"
	"io"
	"strings"
)

// workflowMain is "gateway workflow graph NAME [--config DIR]": the
// workflow of the configuration as Mermaid text, for docs and reviews.
func workflowMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "graph" {
		fmt.Fprintln(stderr, "usage: gateway workflow graph NAME [--config DIR]")
		return exitUsage
	}
	fs := newFlagSet("workflow graph", stderr)
	dir := fs.String("config", "", configHelp)
	// The name may come before or after the flags.
	rest := args[1:]
	var name string
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return helpOrUsage(err)
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	}
	if name == "" || fs.NArg() > 1 || (fs.NArg() == 1 && fs.Arg(0) != name) {
		fmt.Fprintln(stderr, "usage: gateway workflow graph NAME [--config DIR]")
		return exitUsage
	}
	cfg, ok := loadConfig(dir, stderr)
	if !ok {
		return exitUsage
	}
	wf := cfg.Workflows.Get(name)
	if wf == nil {
		fmt.Fprintf(stderr, "gateway workflow graph: no workflow %q in %s (have: %s)\n", name, *dir, strings.Join(cfg.Workflows.Names(), ", "))
		return exitFailed
	}
	fmt.Fprint(stdout, wf.Mermaid())
	return exitOK
}
