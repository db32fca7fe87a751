//go:build benchpprof

// This file is not part of any package here: bench/profile.sh compiles it
// into the gateway's package main with `go build -overlay` (and the
// benchpprof tag), so that a profiling build of the real gateway serves
// net/http/pprof on $GATEWAY_PPROF_ADDR without a line of the gateway's own
// source changing. The measured binary of bench/run.sh never contains it.
package main

import (
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("GATEWAY_PPROF_ADDR")
	if addr == "" {
		return
	}
	go func() {
		if err := http.ListenAndServe(addr, http.DefaultServeMux); err != nil {
			fmt.Fprintf(os.Stderr, "pprof: %v\n", err)
		}
	}()
}
