package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlagSet is a command's flag set, named by the command's words after
// "gateway" ("config check", "audit verify"): a parse error is returned,
// so the command picks the exit code, and printed with the usage to
// stderr.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// helpOrUsage is the exit code of a failed flag parse: -help is exit 0
// (the flag package has printed the flags), anything else a usage error
// it has printed with them.
func helpOrUsage(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// parseArgs parses a command's flags and refuses more than most arguments
// after them; it returns false with the exit code when the command should
// stop.
func parseArgs(fs *flag.FlagSet, args []string, most int, stderr io.Writer) (int, bool) {
	if err := fs.Parse(args); err != nil {
		return helpOrUsage(err), false
	}
	if fs.NArg() > most {
		fmt.Fprintf(stderr, "gateway %s: unexpected argument %q\n", fs.Name(), fs.Arg(most))
		return exitUsage, false
	}
	return exitOK, true
}
