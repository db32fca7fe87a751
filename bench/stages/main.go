// Command stages splits a CPU profile of the gateway (bench/profile.sh) into
// its governance stages, in µs of CPU per request: each sample is counted
// once, in the innermost stage whose function it passes through (the audit
// encoding called from a proxy stage counts as audit, the redaction of an
// answer as redaction), and each stage's total is divided by the requests
// served in the profile's window (wrk's Requests/sec times the profile's
// duration).
//
//	go run ./bench/stages -profile bench/out/profile-gateway-json-governed-c128.pprof \
//	    -wrk bench/out/profile-gateway-json-governed-c128.wrk.txt
//
// It reads the profile through `go tool pprof -traces`, so it needs nothing
// beyond the Go toolchain.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// stage is a row of the table: the functions whose samples it owns.
type stage struct {
	name string
	fn   *regexp.Regexp
}

// rest is where a sample that passes through no stage's function goes: the
// HTTP server, the garbage collector, the scheduler.
const rest = "HTTP server, GC, runtime, the rest"

// stages, matched in this order on each frame from the innermost out.
var stages = []stage{
	{"audit (summaries, encoding, hand-off, writer, fsync)", regexp.MustCompile(`gateway/audit\.|door\.\(\*Journal\)|door\.\(\*Recorder\)|door\.ChecksSummary|proxy\.(requestSummary|responseSummary|callSummary|record$|journalOf|journal\.)|proxy\.\(\*Gateway\)\.journalStage\.func`)},
	{"access log", regexp.MustCompile(`server\.\(\*Server\)\.access|server\.\(\*JSONHandler\)|server\.accessLine|server\.\(\*lockedWriter\)`)},
	{"identity", regexp.MustCompile(`door\.\(\*Identifier\)`)},
	{"reader", regexp.MustCompile(`proxy\.New\.readBody|proxy\.readBody|proxy\.DecodeRequest|proxy\.decodeRequest|internal/strictjson|internal/httpx\.ReadLimited`)},
	{"limits", regexp.MustCompile(`proxy\.\(\*Limits\)|proxy\.\(\*Gateway\)\.allowModel|gateway/limit\.`)},
	{"policy", regexp.MustCompile(`gateway/policy\.|proxy\.New\.ChatPolicy|open-policy-agent`)},
	{"redaction", regexp.MustCompile(`gateway/redact\.|proxy\.redact`)},
	{"answer check (read, shape, usage)", regexp.MustCompile(`proxy\.checkAnswer|proxy\.decodeShape|proxy\.decodeRead|proxy\.\(\*call\)\.readJSON|scope\.\(\*Usage\)`)},
	{"protocol prompt", regexp.MustCompile(`proxy\.\(\*Protocol\)|gateway/sacp\.`)},
	{"forwarding (upstream call, transport)", regexp.MustCompile(`proxy\.\(\*Forwarder\)|proxy\.send|proxy\.try|proxy\.roundTrip|gateway/upstream\.|net/http\.\(\*Transport\)|net/http\.\(\*persistConn\)|net/http\.persistConnWriter|proxy\.\(\*call\)`)},
}

var (
	rpsRe      = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	durationRe = regexp.MustCompile(`Duration: ([0-9.]+)s`)
	sampleRe   = regexp.MustCompile(`^\s*([0-9.]+)(ns|us|µs|ms|s)\s+(\S.*)$`)
)

func main() {
	prof := flag.String("profile", "", "CPU profile (bench/out/profile-*.pprof)")
	wrk := flag.String("wrk", "", "wrk output of the same run (its Requests/sec)")
	flag.Parse()
	if *prof == "" || *wrk == "" {
		fmt.Fprintln(os.Stderr, "usage: stages -profile FILE.pprof -wrk FILE.wrk.txt")
		os.Exit(2)
	}
	if err := run(*prof, *wrk); err != nil {
		fmt.Fprintln(os.Stderr, "stages:", err)
		os.Exit(1)
	}
}

func run(prof, wrk string) error {
	w, err := os.ReadFile(wrk)
	if err != nil {
		return err
	}
	m := rpsRe.FindSubmatch(w)
	if m == nil {
		return fmt.Errorf("%s: no Requests/sec line", wrk)
	}
	rps, _ := strconv.ParseFloat(string(m[1]), 64)
	traces, err := exec.Command("go", "tool", "pprof", "-traces", prof).Output()
	if err != nil {
		return fmt.Errorf("go tool pprof -traces %s: %w", prof, err)
	}
	d := durationRe.FindSubmatch(traces)
	if d == nil {
		return fmt.Errorf("%s: no Duration in the profile", prof)
	}
	secs, _ := strconv.ParseFloat(string(d[1]), 64)
	totals, all := split(traces)
	reqs := rps * secs
	if reqs == 0 {
		return fmt.Errorf("no requests in the window")
	}
	fmt.Printf("%s: %.0f req/s over %.1fs, %.0f µs of CPU per request in all\n\n", prof, rps, secs, all/reqs*1e6)
	fmt.Printf("| stage | µs/request |\n|---|---:|\n")
	for _, s := range stages {
		fmt.Printf("| %s | %.1f |\n", s.name, totals[s.name]/reqs*1e6)
	}
	fmt.Printf("| %s | %.1f |\n", rest, totals[rest]/reqs*1e6)
	return nil
}

// split reads pprof's -traces listing: blocks separated by dashed lines,
// each starting with the sample's value and its innermost frame, then one
// frame a line, outwards. It returns seconds of CPU per stage and in all.
func split(traces []byte) (map[string]float64, float64) {
	totals := map[string]float64{}
	var all float64
	var value float64
	var placed, inBlock bool
	frame := func(fn string) {
		if placed {
			return
		}
		for _, s := range stages {
			if s.fn.MatchString(fn) {
				totals[s.name] += value
				placed = true
				return
			}
		}
	}
	end := func() {
		if inBlock && !placed {
			totals[rest] += value
		}
		inBlock, placed = false, false
	}
	sc := bufio.NewScanner(bytes.NewReader(traces))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			end()
			continue
		}
		if m := sampleRe.FindStringSubmatch(line); m != nil && !inBlock {
			v, _ := strconv.ParseFloat(m[1], 64)
			value = v * unit(m[2])
			all += value
			inBlock = true
			frame(m[3])
			continue
		}
		if inBlock {
			frame(strings.TrimSpace(line))
		}
	}
	end()
	return totals, all
}

func unit(u string) float64 {
	switch u {
	case "ns":
		return 1e-9
	case "us", "µs":
		return 1e-6
	case "ms":
		return 1e-3
	}
	return 1
}
