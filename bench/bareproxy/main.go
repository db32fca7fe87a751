// Command bareproxy is the benchmark's baseline: a bare
// httputil.ReverseProxy in front of one upstream, with the gateway's own
// upstream transport (upstream.NewTransport, the same pool) and immediate
// flushing (FlushInterval -1), and nothing else: no auth, no limits, no body
// reading, no logging per request. What the gateway costs is measured
// against it.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httputil"
	_ "net/http/pprof" // served only with -pprof, on its own listener
	"net/url"
	"os"
	"time"

	"github.com/sacpgw/gateway/upstream"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18082", "listen address")
	up := flag.String("upstream", "http://127.0.0.1:18081", "upstream base URL (scheme://host:port, request paths are appended)")
	pprofAddr := flag.String("pprof", "", "serve net/http/pprof on this address (bench/profile.sh); empty: off")
	flag.Parse()
	if *pprofAddr != "" {
		go func() { log.Println(http.ListenAndServe(*pprofAddr, http.DefaultServeMux)) }()
	}
	target, err := url.Parse(*up)
	if err != nil || target.Host == "" {
		fmt.Fprintf(os.Stderr, "bareproxy: bad -upstream %q\n", *up)
		os.Exit(2)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     upstream.NewTransport(512),
		FlushInterval: -1,
		ErrorLog:      log.New(os.Stderr, "bareproxy: ", log.LstdFlags),
	}
	// The same server settings as the gateway's (server.Serve).
	srv := &http.Server{
		Addr:              *listen,
		Handler:           rp,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          log.New(os.Stderr, "bareproxy: ", log.LstdFlags),
	}
	fmt.Fprintf(os.Stderr, "bareproxy: listening on %s, upstream %s\n", *listen, target)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintf(os.Stderr, "bareproxy: %v\n", err)
		os.Exit(1)
	}
}
