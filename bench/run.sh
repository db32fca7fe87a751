#!/usr/bin/env bash
# bench/run.sh — load benchmark: the gateway against a bare reverse proxy,
# both in front of the same tiny mock upstream, in the same run.
#
#   bash bench/run.sh                 # full run (about 5 minutes)
#   DURATION=5s bash bench/run.sh     # shorter wrk runs
#
# Environment (defaults in brackets):
#   DURATION [10s]        length of one wrk run
#   CONNS ["1 32 128"]    wrk connection counts
#   MODES ["json sse sacp"]  answer kinds (post.lua / post_sse.lua / post_sacp.lua: a SACP agent
#                         whose answers are validated against its JSON Schema)
#   ROUNDS [2]            rounds per (mode, conns); each round runs bare, then gateway
#   WARMUP [2s]           unmeasured wrk run per target and mode before the first round
#   SSE_STREAMS [10000]   concurrent streams of the sseload check (0 skips it)
#   SSE_TARGETS ["gateway bare"]  targets of the sseload check
#   SSE_RAMP [4s]         sseload spreads the stream starts over this long
#   SSE_INTERVAL [5s]     pause between the events of a sseload stream (upstream -slow-interval)
#   BENCH_LOG_LEVEL [warn]  gateway log level (info keeps the per-request access log)
#   BENCH_AUDIT_DIR [a temp dir under $TMPDIR]  the gateway's audit.dir; every answer waits for
#                         its audit entries' fsync, so the file system matters (/dev/shm/... takes
#                         the disk out of the figures)
#   UPSTREAM_PORT [18081] BARE_PORT [18082] GATEWAY_PORT [18083]
#
# Output: the report on stdout and in bench/out/report.txt; raw wrk outputs in
# bench/out/wrk/, process logs in bench/out/*.log.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/bench/out
DURATION=${DURATION:-10s}
CONNS=${CONNS-"1 32 128"}
MODES=${MODES-"json sse sacp"}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-2s}
SSE_STREAMS=${SSE_STREAMS:-10000}
SSE_TARGETS=${SSE_TARGETS:-"gateway bare"}
SSE_RAMP=${SSE_RAMP:-4s}
SSE_INTERVAL=${SSE_INTERVAL:-5s}
BENCH_LOG_LEVEL=${BENCH_LOG_LEVEL:-warn}
BENCH_AUDIT_DIR=${BENCH_AUDIT_DIR:-}
UPSTREAM_PORT=${UPSTREAM_PORT:-18081}
BARE_PORT=${BARE_PORT:-18082}
GATEWAY_PORT=${GATEWAY_PORT:-18083}
TOKEN=bench-token
SACP_TOKEN=bench-sacp-token

# Targets of the issue (one governed path at close to a bare proxy's cost).
TARGET_RPS_RATIO=0.70   # gateway req/s >= 70% of bare at 128 connections (plain agent)
TARGET_SACP_RATIO=0.60  # ... >= 60% for the SACP agent with a JSON Schema
TARGET_CPU_RATIO=1.6    # gateway CPU/request <= 1.6x bare
TARGET_P50_DELTA=100    # gateway p50 <= bare p50 + 100 us at 1 connection

mkdir -p "$OUT/wrk"
: >"$OUT/report.txt"
# Everything printed from here on is the report.
exec > >(tee -a "$OUT/report.txt") 2>&1

die() { echo "run.sh: $*" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

# ---------------------------------------------------------------- tools
SUDO=
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi
need_pkgs=()
command -v wrk >/dev/null || need_pkgs+=(wrk)
command -v curl >/dev/null || need_pkgs+=(curl)
if [ ${#need_pkgs[@]} -gt 0 ]; then
	echo "installing ${need_pkgs[*]} from Debian..."
	export DEBIAN_FRONTEND=noninteractive
	if ! $SUDO apt-get install -y "${need_pkgs[@]}" >"$OUT/apt.log" 2>&1; then
		$SUDO apt-get update >>"$OUT/apt.log" 2>&1 || true
		$SUDO apt-get install -y "${need_pkgs[@]}" >>"$OUT/apt.log" 2>&1 || die "apt-get install ${need_pkgs[*]} failed (see $OUT/apt.log)"
	fi
fi
command -v go >/dev/null || die "go not found"
CLK_TCK=$(getconf CLK_TCK)

# ---------------------------------------------------------------- build
echo "building gateway, upstream, bareproxy, sseload into bench/out/ ..."
(
	cd "$ROOT"
	go build -o "$OUT/gateway" ./cmd/gateway
	go build -o "$OUT/upstream" ./bench/upstream
	go build -o "$OUT/bareproxy" ./bench/bareproxy
	go build -o "$OUT/sseload" ./bench/sseload
)

# ---------------------------------------------------------------- limits
# Each proxied stream holds two descriptors in a proxy (client and upstream
# side); raise the soft limit to the hard one for everything started below.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)

# ---------------------------------------------------------------- processes
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/gwbench.XXXXXX")
PIDS=()
SAMPLER=
cleanup() {
	local rc=$?
	[ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null || true
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMPD"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for port in "$UPSTREAM_PORT" "$BARE_PORT" "$GATEWAY_PORT"; do
	if (: </dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
		die "port $port is already in use (set UPSTREAM_PORT, BARE_PORT, GATEWAY_PORT)"
	fi
done

mkdir -p "$TMPD/config" "$TMPD/work"
AUDIT_DIR=${BENCH_AUDIT_DIR:-$TMPD/work/audit}
mkdir -p "$AUDIT_DIR"
AUDIT_FS=$(df -T "$AUDIT_DIR" 2>/dev/null | awk 'NR == 2 { print $2 }')
cat >"$TMPD/config/gateway.yaml" <<EOF
listen: "127.0.0.1:$GATEWAY_PORT"
shutdown_timeout: 2s
log:
  level: $BENCH_LOG_LEVEL
  format: json
upstreams:
  - name: bench
    type: openai
    base_url: http://127.0.0.1:$UPSTREAM_PORT/v1
    models: ["*"]
    max_retries: 0
    max_idle_conns: 512
audit:
  dir: $AUDIT_DIR
EOF
cat >"$TMPD/config/agents.yaml" <<EOF
agents:
  bench:
    type: benchmark
    capabilities: [read]
    rate_limit: 100000000/second     # on, never reached
    token_limit: 1000000000/second   # on, never reached (streams get include_usage added)
    token_sha256: "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)"
  bench-sacp:
    type: benchmark
    capabilities: [read]
    rate_limit: 100000000/second
    token_limit: 1000000000/second
    response_format: json_standard
    data_schema_file: sacp-data.json
    token_sha256: "$(printf %s "$SACP_TOKEN" | sha256sum | cut -d' ' -f1)"
EOF
cat >"$TMPD/config/sacp-data.json" <<EOF
{"type": "object", "required": ["answer"], "properties": {"answer": {"type": "integer"}, "unit": {"type": "string"}}}
EOF
cat >"$TMPD/config/protocol.yaml" <<EOF
protocol:
  version: "1.0"
EOF
"$OUT/gateway" config check --config "$TMPD/config" >/dev/null || die "the generated gateway config is invalid"

"$OUT/upstream" -listen "127.0.0.1:$UPSTREAM_PORT" -slow-interval "$SSE_INTERVAL" 2>"$OUT/upstream.log" &
UP_PID=$!
PIDS+=("$UP_PID")
"$OUT/bareproxy" -listen "127.0.0.1:$BARE_PORT" -upstream "http://127.0.0.1:$UPSTREAM_PORT" 2>"$OUT/bareproxy.log" &
BARE_PID=$!
PIDS+=("$BARE_PID")
(cd "$TMPD/work" && exec "$OUT/gateway" serve --config "$TMPD/config" --listen "127.0.0.1:$GATEWAY_PORT") 2>"$OUT/gateway.log" &
GW_PID=$!
PIDS+=("$GW_PID")

wait_ready upstream "$UP_PID" "$UPSTREAM_PORT"
wait_ready bareproxy "$BARE_PID" "$BARE_PORT"
wait_ready gateway "$GW_PID" "$GATEWAY_PORT"

url_of() { case $1 in bare) echo "http://127.0.0.1:$BARE_PORT/v1/chat/completions" ;; gateway) echo "http://127.0.0.1:$GATEWAY_PORT/v1/chat/completions" ;; esac; }
pid_of() { case $1 in bare) echo "$BARE_PID" ;; gateway) echo "$GW_PID" ;; esac; }

# ---------------------------------------------------------------- sanity
# The gateway must really authenticate and limit, and answer 200 with the
# token, or the figures below measure error pages.
GW_URL=$(url_of gateway)
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$GW_URL" -H 'Content-Type: application/json' \
	-d '{"model":"bench-model","messages":[{"role":"user","content":"hi"}]}')
[ "$code" = 401 ] || die "gateway without a token answered $code, want 401 (auth off?)"
hdrs=$(curl -s -D - -o "$TMPD/answer.json" -X POST "$GW_URL" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
	-d '{"model":"bench-model","messages":[{"role":"user","content":"hi"}]}')
grep -q '^HTTP/1.1 200' <<<"$hdrs" || die "gateway with the token did not answer 200: $(head -1 <<<"$hdrs")"
grep -qi '^X-Ratelimit-Limit-Requests:' <<<"$hdrs" || die "gateway answer has no X-Ratelimit-Limit-Requests: rate limit off?"
grep -qi '^X-Ratelimit-Limit-Tokens:' <<<"$hdrs" || die "gateway answer has no X-Ratelimit-Limit-Tokens: token limit off?"
sacp_hdrs=$(curl -s -D - -o "$TMPD/sacp.json" -X POST "$GW_URL" -H "Authorization: Bearer $SACP_TOKEN" -H 'Content-Type: application/json' \
	-d '{"model":"bench-sacp","messages":[{"role":"user","content":"hi"}]}')
grep -qi '^X-Sacp-Valid: true' <<<"$sacp_hdrs" || die "gateway: the SACP agent's answer is not a valid SACP answer (the sacp figures would measure fallbacks): $(head -c 300 "$TMPD/sacp.json")"
grep -qi '^X-Sacp-Attempts: 1' <<<"$sacp_hdrs" || die "gateway: the SACP agent's answer took more than one attempt"
for t in bare gateway; do
	last=$(curl -sN -X POST "$(url_of "$t")" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
		-d '{"model":"bench-model","stream":true,"messages":[{"role":"user","content":"hi"}]}' | grep -v '^$' | tail -1)
	[ "$last" = "data: [DONE]" ] || die "$t: SSE answer does not end with data: [DONE] (last line: $last)"
done

# ---------------------------------------------------------------- helpers
machine_ticks() { # busy clock ticks of the whole machine (user nice system irq softirq steal)
	awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}
children_ticks() { # CPU of this shell's waited-for children (cutime+cstime, fields 16, 17), in clock ticks
	awk '{ sub(/^.*\) /, ""); print $14 + $15 }' "/proc/$$/stat"
}


RESULTS=$OUT/results.tsv
printf 'mode\tconns\tround\ttarget\trps\tp50_us\tp99_us\tcpu_us_req\tupstream_cpu_us_req\trequests\terrors\tother_pct\n' >"$RESULTS"

script_of() { case $1 in sse) echo "$ROOT/bench/post_sse.lua" ;; sacp) echo "$ROOT/bench/post_sacp.lua" ;; *) echo "$ROOT/bench/post.lua" ;; esac; }
threads_of() { if [ "$1" -lt 2 ]; then echo 1; else echo 2; fi; }

run_one() { # target mode conns round
	local t=$1 mode=$2 c=$3 r=$4 pid f b0 b1 u0 u1 m0 m1 w0 w1 s0 s1
	pid=$(pid_of "$t")
	f=$OUT/wrk/$mode-c$c-r$r-$t.txt
	b0=$(cpu_ticks "$pid")
	u0=$(cpu_ticks "$UP_PID")
	m0=$(machine_ticks)
	w0=$(children_ticks)
	s0=$(date +%s%N)
	BENCH_TOKEN=$TOKEN BENCH_SACP_TOKEN=$SACP_TOKEN wrk -t"$(threads_of "$c")" -c"$c" -d"$DURATION" --latency -s "$(script_of "$mode")" "$(url_of "$t")" >"$f" 2>&1 ||
		echo "  (wrk exited non-zero: see $f)"
	s1=$(date +%s%N)
	w1=$(children_ticks)
	m1=$(machine_ticks)
	b1=$(cpu_ticks "$pid")
	u1=$(cpu_ticks "$UP_PID")
	kill -0 "$pid" 2>/dev/null || die "$t died during the run"
	read -r rps p50 p99 reqs errs < <(parse_wrk "$f")
	# other_pct: CPU used by everything but the target, the upstream and wrk
	# during the run, in % of the machine: the contention behind that row.
	awk -v m="$mode" -v c="$c" -v r="$r" -v t="$t" -v rps="$rps" -v p50="$p50" -v p99="$p99" \
		-v reqs="$reqs" -v errs="$errs" -v db="$((b1 - b0))" -v du="$((u1 - u0))" -v hz="$CLK_TCK" \
		-v dm="$((m1 - m0))" -v dw="$((w1 - w0))" -v ns="$((s1 - s0))" -v ncpu="$(nproc)" 'BEGIN {
		cpu = reqs > 0 ? db * 1e6 / hz / reqs : 0
		ucpu = reqs > 0 ? du * 1e6 / hz / reqs : 0
		other = dm - db - du - dw; if (other < 0) other = 0
		opct = ns > 0 ? 100 * other / hz / (ns / 1e9) / ncpu : 0
		printf "%s\t%s\t%s\t%s\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%d\t%d\t%.0f\n", m, c, r, t, rps, p50, p99, cpu, ucpu, reqs, errs, opct
	}' >>"$RESULTS"
	tail -1 "$RESULTS" | awk -F'\t' '{ printf "  %-4s %4s  round %s  %-7s  %8s req/s  p50 %6s us  p99 %7s us  cpu %6s us/req  errors %s  other load %s%%\n", $1, $2, $3, $4, $5, $6, $7, $8, $11, $12 }'
}

# ---------------------------------------------------------------- header
NCPU=$(nproc)
echo
echo "=== gateway load benchmark — $(date -u '+%Y-%m-%d %H:%M:%SZ') ==="
echo "tree: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$( [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] && echo ' + uncommitted changes')"
echo "machine: $NCPU cores, $(go version | awk '{print $3}'), $(wrk --version 2>&1 | head -1 | awk '{print "wrk " $2}'), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "note: no taskset pinning — wrk, the mock upstream and the target share the same $NCPU cores (and whatever else runs on"
echo "      this machine), so req/s and latency include that contention and swing between runs; CPU us/req counts"
echo "      the target process only (utime+stime from /proc/<pid>/stat, CLK_TCK=$CLK_TCK) and is the stable figure."
echo "setup: mock upstream :$UPSTREAM_PORT; bare = httputil.ReverseProxy + upstream.NewTransport(512), FlushInterval -1 (:$BARE_PORT);"
echo "       gateway (:$GATEWAY_PORT) with auth (bearer token) and limits on (rate_limit 100000000/second,"
echo "       token_limit 1000000000/second), log level $BENCH_LOG_LEVEL, max_retries 0,"
echo "       audit trail in $AUDIT_DIR ($AUDIT_FS; answers wait for the audit fsync)."
echo "runs: DURATION=$DURATION CONNS=\"$CONNS\" MODES=\"$MODES\" ROUNDS=$ROUNDS, targets alternate bare, gateway in every round."
echo "open files limit: $NOFILE"

# ---------------------------------------------------------------- warm-up
echo
echo "warm-up ($WARMUP per target and mode, not measured)..."
for mode in $MODES; do
	for t in bare gateway; do
		BENCH_TOKEN=$TOKEN BENCH_SACP_TOKEN=$SACP_TOKEN wrk -t2 -c32 -d"$WARMUP" -s "$(script_of "$mode")" "$(url_of "$t")" >/dev/null 2>&1 || true
	done
done

# ---------------------------------------------------------------- wrk runs
echo
echo "wrk runs:"
for mode in $MODES; do
	for c in $CONNS; do
		for r in $(seq "$ROUNDS"); do
			for t in bare gateway; do
				run_one "$t" "$mode" "$c" "$r"
			done
		done
	done
done

# ---------------------------------------------------------------- table
echo
echo "results (mean over $ROUNDS rounds; CPU and upstream CPU in us per request; other% = CPU of everything else on"
echo "the machine during the run, in % of its $NCPU cores; ratios are gateway/bare within a round, averaged over rounds):"
awk -F'\t' -v rr="$TARGET_RPS_RATIO" -v rs="$TARGET_SACP_RATIO" -v cr="$TARGET_CPU_RATIO" -v pd="$TARGET_P50_DELTA" '
NR == 1 { next }
{
	k = $1 SUBSEP $2
	if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
	kt = k SUBSEP $4
	n[kt]++; rps[kt] += $5; p50[kt] += $6; p99[kt] += $7; cpu[kt] += $8; ucpu[kt] += $9; err[kt] += $11; oth[kt] += $12
	kr = k SUBSEP $3
	v[kr, $4, "rps"] = $5; v[kr, $4, "p50"] = $6; v[kr, $4, "cpu"] = $8
	if (!((k, $3) in rounds)) { rounds[k, $3] = 1; rlist[k] = rlist[k] " " $3 }
}
END {
	printf "%-5s %5s  %-8s %10s %9s %9s %11s %13s %7s %7s\n", "mode", "conns", "target", "req/s", "p50 us", "p99 us", "CPU us/req", "upstream CPU", "errors", "other%"
	line = "---------------------------------------------------------------------------------------------"
	print line
	for (i = 1; i <= nk; i++) {
		k = order[i]; split(k, kk, SUBSEP)
		for (ti = 1; ti <= 2; ti++) {
			t = ti == 1 ? "bare" : "gateway"; kt = k SUBSEP t
			if (!n[kt]) continue
			printf "%-5s %5s  %-8s %10.0f %9.0f %9.0f %11.1f %13.1f %7d %7.0f\n", kk[1], kk[2], t, rps[kt]/n[kt], p50[kt]/n[kt], p99[kt]/n[kt], cpu[kt]/n[kt], ucpu[kt]/n[kt], err[kt], oth[kt]/n[kt]
		}
	}
	print ""
	print "gateway vs bare, same round:"
	printf "%-5s %5s  %8s %7s %10s  %-16s %-12s %-16s\n", "mode", "conns", "req/s x", "CPU x", "p50 +us", "req/s>=" rr "/" rs "x@128", "CPU<=" cr "x", "p50+<=" pd "us@1"
	print line
	for (i = 1; i <= nk; i++) {
		k = order[i]; split(k, kk, SUBSEP)
		m = split(substr(rlist[k], 2), rl, " ")
		sr = sc = sd = 0; cnt = 0
		for (j = 1; j <= m; j++) {
			kr = k SUBSEP rl[j]
			if (v[kr, "bare", "rps"] == "" || v[kr, "gateway", "rps"] == "") continue
			if (v[kr, "bare", "rps"] > 0) sr += v[kr, "gateway", "rps"] / v[kr, "bare", "rps"]
			if (v[kr, "bare", "cpu"] > 0) sc += v[kr, "gateway", "cpu"] / v[kr, "bare", "cpu"]
			sd += v[kr, "gateway", "p50"] - v[kr, "bare", "p50"]
			cnt++
		}
		if (!cnt) continue
		ar = sr / cnt; ac = sc / cnt; ad = sd / cnt
		want = kk[1] == "sacp" ? rs : rr
		vr = kk[2] == 128 ? (ar >= want ? "PASS" : "MISS") : "-"
		vc = ac <= cr ? "PASS" : "MISS"
		vd = kk[2] == 1 ? (ad <= pd ? "PASS" : "MISS") : "-"
		printf "%-5s %5s  %8.3f %7.3f %10.0f  %-16s %-12s %-16s\n", kk[1], kk[2], ar, ac, ad, vr, vc, vd
		if (vr == "MISS" || vc == "MISS" || vd == "MISS") miss++
		if (vr != "-") tr++
		if (vd != "-") td++
	}
	if (!tr) print "(no 128-connection runs: the req/s target was not checked)"
	if (!td) print "(no 1-connection runs: the p50 target was not checked)"
	print ""
	printf "wrk targets: %s\n", miss ? "MISS (" miss " row(s) miss a target)" : "all PASS"
}' "$RESULTS" | tee "$OUT/summary.txt"

# ---------------------------------------------------------------- sseload
fd_sampler() { # pid file: max open fds of pid while running
	local max=0 n
	while kill -0 "$1" 2>/dev/null; do
		n=$(ls "/proc/$1/fd" 2>/dev/null | wc -l)
		[ "$n" -gt "$max" ] && max=$n && echo "$max" >"$2"
		sleep 0.2
	done
}

SSE_VERDICT=
if [ "$SSE_STREAMS" -gt 0 ]; then
	echo
	echo "sseload: $SSE_STREAMS concurrent SSE streams per target (starts spread over $SSE_RAMP, upstream pauses $SSE_INTERVAL"
	echo "         between events, so every stream lasts about 6x that), each must end with data: [DONE]"
	if [ "$NOFILE" -lt $((2 * SSE_STREAMS + 64)) ]; then
		echo "         warning: open files limit $NOFILE < 2 x $SSE_STREAMS + 64: a proxy holds two descriptors per stream,"
		echo "         so at the peak a target may fail to accept or to dial (the hard limit cannot be raised here)."
	fi
	for t in $SSE_TARGETS; do
		pid=$(pid_of "$t")
		echo 0 >"$TMPD/fds"
		fd_sampler "$pid" "$TMPD/fds" &
		SAMPLER=$!
		log=$OUT/$( [ "$t" = bare ] && echo bareproxy || echo gateway ).log
		emfile0=$(grep -c 'too many open files' "$log" || true)
		set +e
		"$OUT/sseload" -url "$(url_of "$t")" -token "$TOKEN" -n "$SSE_STREAMS" -ramp "$SSE_RAMP" >"$TMPD/sse.out" 2>&1
		rc=$?
		set -e
		kill "$SAMPLER" 2>/dev/null || true
		wait "$SAMPLER" 2>/dev/null || true
		SAMPLER=
		emfile=$(( $(grep -c 'too many open files' "$log" || true) - emfile0 ))
		echo "  $t:"
		sed 's/^/    /' "$TMPD/sse.out"
		echo "    peak open fds of the $t process: $(cat "$TMPD/fds") (limit $(awk '/Max open files/ {print $4}' "/proc/$pid/limits")); 'too many open files' log lines: $emfile; sseload exit $rc"
		if [ "$t" = gateway ]; then
			case $rc in
			0) SSE_VERDICT="PASS (every stream ended with [DONE])" ;;
			1) SSE_VERDICT="MISS (streams were cut)" ;;
			2) SSE_VERDICT="MISS (no stream was cut, but some were not served: see the reasons above)" ;;
			*) SSE_VERDICT="MISS (sseload exit $rc)" ;;
			esac
		fi
		kill -0 "$pid" 2>/dev/null || die "$t died during sseload"
		sleep 2
	done
	if grep -qw bare <<<"$SSE_TARGETS"; then
		echo "  (cut streams on the bare proxy are golang/go#40747: it forwards the client's unread request body, and"
		echo "   when the answer starts before the body reader saw EOF, net/http closes the body under the transport,"
		echo "   which then drops the upstream connection mid-stream. The gateway reads the body first.)"
	fi
	[ -n "$SSE_VERDICT" ] && echo "stream target (gateway: every stream ends with [DONE]): $SSE_VERDICT"
fi

echo
echo "report: $OUT/report.txt  raw: $RESULTS, $OUT/wrk/"
