// Command gateway is the governance gateway for LLM agent traffic: an
// OpenAI-compatible reverse proxy that identifies agents, enforces limits
// and policy, and audits what passes. This file only parses the command line
// and dispatches; wiring lives in app.go, logic in the packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/sacpgw/gateway/app"
	"github.com/sacpgw/gateway/internal/config"
)

// Set with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = ""
)

// Exit codes (docs/reference.md, Command line).
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches by the command table (commands.go) and returns the exit
// code.
func run(args []string, stdout, stderr io.Writer) int {
	return dispatch(args, stdout, stderr)
}

func versionMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", stderr)
	if code, ok := parseArgs(fs, args, 0, stderr); !ok {
		return code
	}
	fmt.Fprintf(stdout, "gateway %s commit %s %s\n", version, buildCommit(), runtime.Version())
	return exitOK
}

func serveMain(args []string, stderr io.Writer) int {
	fs := newFlagSet("serve", stderr)
	dir := fs.String("config", "", configHelp)
	listen := fs.String("listen", "", "listen address (overrides gateway.yaml listen)")
	sidecar := fs.String("sidecar-agent", "", "sidecar mode: attribute every request to this agent (no key or any placeholder key; another agent's token is refused); requires a loopback listen address")
	if code, ok := parseArgs(fs, args, 0, stderr); !ok {
		return code
	}
	cfg, ok := loadConfig(dir, stderr)
	if !ok {
		return exitUsage
	}
	tuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := app.Serve(ctx, cfg, app.Options{Sidecar: *sidecar, Version: version, Listen: *listen}, stderr); err != nil {
		fmt.Fprintf(stderr, "gateway: %v\n", err)
		var ue *app.UsageError
		if errors.As(err, &ue) {
			return exitUsage
		}
		return exitFailed
	}
	return exitOK
}

func checkMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("config check", stderr)
	dir := fs.String("config", "", configHelp)
	explain := fs.Bool("explain", false, "print the effective configuration, defaults applied, each value with its source (file:line, env ${VAR} or default)")
	if code, ok := parseArgs(fs, args, 0, stderr); !ok {
		return code
	}
	if !needConfig(dir, stderr) {
		return exitUsage
	}
	cfg, settings, err := config.Explain(*dir)
	if err != nil {
		reportConfig(stderr, err)
		return exitFailed
	}
	if err := app.Check(cfg); err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return exitFailed
	}
	if *explain {
		// Only a valid configuration is explained: what the server would
		// run with, not a guess at what a broken file meant.
		fmt.Fprintf(stdout, "# effective configuration of %s: key = value  # source (file:line, env ${VAR} at file:line, or default)\n", *dir)
		fmt.Fprintf(stdout, "# credentials (api_key, approval.webhook) show as [set] or [empty]; workflows.yaml: see gateway workflow graph\n")
		if err := config.WriteSettings(stdout, settings); err != nil {
			fmt.Fprintf(stderr, "gateway config check: %v\n", err)
			return exitFailed
		}
	}
	fmt.Fprintf(stdout, "configuration is valid: %d agents, %d upstreams (%s)\n", len(cfg.Agents), len(cfg.Gateway.Upstreams), *dir)
	return exitOK
}

func reportConfig(w io.Writer, err error) {
	var ps config.Problems
	if errors.As(err, &ps) {
		for _, p := range ps {
			fmt.Fprintln(w, p.String())
		}
		fmt.Fprintf(w, "gateway: configuration has %d problem(s)\n", len(ps))
		return
	}
	fmt.Fprintf(w, "gateway: %v\n", err)
}

// gcPercent is the serving gateway's GOGC unless the environment sets one.
// Its live heap is small (tens of MB) and its allocation rate high, so with
// Go's default of 100 it collects hundreds of times a second under load,
// and every collection also shrinks the goroutine stacks that policy
// evaluation then grows again. Under wrk at 128 connections 400 took the
// CPU per request down by about a tenth; GOMEMLIMIT (the Helm chart sets it
// to the container's memory limit) still bounds the heap.
const gcPercent = 400

func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}

func buildCommit() string {
	if commit != "" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
