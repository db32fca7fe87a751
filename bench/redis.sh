#!/usr/bin/env bash
# bench/redis.sh — two gateway replicas sharing one Redis (issue 6 item 9).
#
#   bash bench/redis.sh                 # about 2 minutes
#   RC_DURATION=60s ROUNDS=5 bash bench/redis.sh
#
# What it does: builds the gateway, the mock upstream and bench/ratecheck;
# starts redis-server on a free loopback port (no persistence), the mock
# upstream, two gateway replicas A and B with the same config files
# (state.backend redis, state.on_failure closed; each its own listen port,
# audit dir and audit.chain), and a third gateway M with the same files but
# state.backend memory. Then:
#
#   1. accuracy: bench/ratecheck drives A and B at once for RC_DURATION with
#      the agent "ratecheck" (rate_limit RC_LIMIT, burst = N, no token limit)
#      and compares the admitted total with burst + rate x elapsed, and the
#      rate after the burst with the configured rate. Target: within ±1%.
#   2. latency: wrk --latency -c1 with bench/post.lua (agent "bench", rate and
#      token limits on but never reached, like bench/run.sh) against M
#      (memory) and A (redis), alternating, ROUNDS rounds of DURATION;
#      the p50 delta (redis - memory) per round, averaged. Target: <= 300 us.
#
# Environment (defaults in brackets):
#   RC_DURATION [30s]      accuracy window
#   RC_LIMIT [3000/minute] the ratecheck agent's rate_limit
#   RC_WORKERS [8]         ratecheck concurrent requests per replica
#   DURATION [10s]         one wrk run;  ROUNDS [3];  WARMUP [2s]
#   BENCH_AUDIT_DIR [/dev/shm/... when writable, else a temp dir]  parent of the
#                          replicas' audit dirs; every answer waits for its audit
#                          fsync, and a disk's fsync jitter would drown a 300 us delta
#   BENCH_LOG_LEVEL [warn]
#
# Output: the report on stdout and in bench/out/redis-report.txt; process logs
# in bench/out/redis-*.log, raw wrk outputs in bench/out/wrk/redis-*.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/bench/out
RC_DURATION=${RC_DURATION:-30s}
RC_LIMIT=${RC_LIMIT:-3000/minute}
RC_WORKERS=${RC_WORKERS:-8}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-2s}
BENCH_LOG_LEVEL=${BENCH_LOG_LEVEL:-warn}
BENCH_AUDIT_DIR=${BENCH_AUDIT_DIR:-}
TOKEN=bench-token
RC_TOKEN=ratecheck-token

TARGET_ACCURACY_PCT=1   # |admitted - expected| <= 1%
TARGET_P50_DELTA=300    # redis p50 <= memory p50 + 300 us at 1 connection

mkdir -p "$OUT/wrk"
: >"$OUT/redis-report.txt"
exec > >(tee -a "$OUT/redis-report.txt") 2>&1

die() { echo "redis.sh: $*" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

for t in go wrk curl redis-server redis-cli; do
	command -v "$t" >/dev/null || die "$t not found (redis-server and redis-cli: apt-get install redis-server)"
done

# ---------------------------------------------------------------- limit
case $RC_LIMIT in
*/*) RC_N=${RC_LIMIT%%/*} ;;
*) die "RC_LIMIT must be N/period" ;;
esac
case ${RC_LIMIT#*/} in
second | s) RC_PERIOD=1s ;;
minute | min | m) RC_PERIOD=1m ;;
hour | h) RC_PERIOD=1h ;;
*) die "RC_LIMIT period must be second, minute or hour" ;;
esac

# ---------------------------------------------------------------- build
echo "building gateway, upstream, ratecheck into bench/out/ ..."
(
	cd "$ROOT"
	go build -o "$OUT/gateway" ./cmd/gateway
	go build -o "$OUT/upstream" ./bench/upstream
	go build -o "$OUT/ratecheck" ./bench/ratecheck
)

# ---------------------------------------------------------------- processes
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/gwredis.XXXXXX")
if [ -z "$BENCH_AUDIT_DIR" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
	AUDIT_PARENT=$(mktemp -d /dev/shm/gwredis-audit.XXXXXX)
	RM_AUDIT=$AUDIT_PARENT
else
	AUDIT_PARENT=${BENCH_AUDIT_DIR:-$TMPD/audit}
	RM_AUDIT=
fi
PIDS=()
cleanup() {
	local rc=$?
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMPD"
	[ -n "$RM_AUDIT" ] && rm -rf "$RM_AUDIT"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

TAKEN=" "
free_port() { # a loopback port nobody answers on, not handed out before
	local p
	for p in $(seq "$1" $(($1 + 500))); do
		case $TAKEN in *" $p "*) continue ;; esac
		if ! (: </dev/tcp/127.0.0.1/"$p") 2>/dev/null; then
			TAKEN="$TAKEN$p "
			echo "$p"
			return 0
		fi
	done
	die "no free port from $1"
}
REDIS_PORT=$(free_port 16379)
UPSTREAM_PORT=$(free_port 18181)
A_PORT=$(free_port 18191)
B_PORT=$(free_port $((A_PORT + 1)))
M_PORT=$(free_port $((B_PORT + 1)))

mkdir -p "$TMPD/config" "$TMPD/work" "$TMPD/redis"
# One set of files for all three gateways; what differs comes from the
# environment (values only): the state backend, the audit dir and chain.
cat >"$TMPD/config/gateway.yaml" <<EOF
listen: "127.0.0.1:0"                # each process gets --listen
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
  dir: \${BENCH_AUDIT}
  chain: \${BENCH_CHAIN}
state:
  backend: \${BENCH_STATE:-redis}
  redis_url: redis://127.0.0.1:$REDIS_PORT/0
  on_failure: closed                 # a Redis failure is a 503 here, never a silent local admit
EOF
cat >"$TMPD/config/agents.yaml" <<EOF
agents:
  bench:
    type: benchmark
    capabilities: [read]
    rate_limit: 100000000/second     # on, never reached
    token_limit: 1000000000/second   # on, never reached
    token_sha256: "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)"
  ratecheck:
    type: benchmark
    capabilities: [read]
    rate_limit: $RC_LIMIT             # the shared limit under test (burst = N)
    token_sha256: "$(printf %s "$RC_TOKEN" | sha256sum | cut -d' ' -f1)"
EOF
cat >"$TMPD/config/protocol.yaml" <<EOF
protocol:
  version: "1.0"
EOF
BENCH_AUDIT=$TMPD/check BENCH_CHAIN=check "$OUT/gateway" config check --config "$TMPD/config" >/dev/null ||
	die "the generated gateway config is invalid"

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$TMPD/redis" \
	>"$OUT/redis-server.log" 2>&1 &
REDIS_PID=$!
PIDS+=("$REDIS_PID")
"$OUT/upstream" -listen "127.0.0.1:$UPSTREAM_PORT" 2>"$OUT/redis-upstream.log" &
UP_PID=$!
PIDS+=("$UP_PID")

for i in $(seq 50); do
	redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
	kill -0 "$REDIS_PID" 2>/dev/null || die "redis-server exited at startup (see $OUT/redis-server.log)"
	sleep 0.1
done
redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 || die "redis-server not answering on $REDIS_PORT"

start_gw() { # name port backend -> pid in GW_PID
	mkdir -p "$AUDIT_PARENT/$1"
	(cd "$TMPD/work" && BENCH_AUDIT="$AUDIT_PARENT/$1" BENCH_CHAIN="bench-$1" BENCH_STATE="$3" \
		exec "$OUT/gateway" serve --config "$TMPD/config" --listen "127.0.0.1:$2") 2>"$OUT/redis-gw-$1.log" &
	GW_PID=$!
	PIDS+=("$GW_PID")
}
start_gw a "$A_PORT" redis
A_PID=$GW_PID
start_gw b "$B_PORT" redis
B_PID=$GW_PID
start_gw m "$M_PORT" memory
M_PID=$GW_PID

wait_ready upstream "$UP_PID" "$UPSTREAM_PORT"
wait_ready gateway-a "$A_PID" "$A_PORT" /readyz
wait_ready gateway-b "$B_PID" "$B_PORT" /readyz
wait_ready gateway-m "$M_PID" "$M_PORT" /readyz

url() { echo "http://127.0.0.1:$1/v1/chat/completions"; }

# ---------------------------------------------------------------- sanity
# The redis replicas must really use Redis: the bench agent's token budget
# key appears there (its GCRA key expires at once, the limit being so high).
for p in "$A_PORT" "$B_PORT" "$M_PORT"; do
	code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$(url "$p")" -H "Authorization: Bearer $TOKEN" \
		-H 'Content-Type: application/json' -d '{"model":"bench-model","messages":[{"role":"user","content":"hi"}]}')
	[ "$code" = 200 ] || die "gateway on $p answered $code with the bench token, want 200"
done
keys=$(redis-cli -p "$REDIS_PORT" --scan --pattern '*' | sort | tr '\n' ' ')
grep -q 'tok:bench' <<<"$keys" || die "no token-budget key of agent bench in Redis (keys: $keys): redis backend not in use?"

metric() { # port name -> value (0 when absent)
	curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n { v = $2 } END { print v + 0 }'
}

# ---------------------------------------------------------------- header
NCPU=$(nproc)
echo
echo "=== gateway with Redis state: two replicas — $(date -u '+%Y-%m-%d %H:%M:%SZ') ==="
echo "tree: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$( [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] && echo ' + uncommitted changes')"
echo "machine: $NCPU cores, $(go version | awk '{print $3}'), $(redis-server --version | awk '{print $3}' | tr -d v=) redis-server, $(wrk --version 2>&1 | head -1 | awk '{print "wrk " $2}'), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "setup: redis-server 127.0.0.1:$REDIS_PORT (--save \"\" --appendonly no); mock upstream :$UPSTREAM_PORT;"
echo "       gateway A :$A_PORT and B :$B_PORT, state.backend redis, on_failure closed, same config files,"
echo "       own audit dir and chain (bench-a, bench-b); gateway M :$M_PORT, the same files with state.backend memory;"
echo "       audit dirs under $AUDIT_PARENT ($(df -T "$AUDIT_PARENT" 2>/dev/null | awk 'NR == 2 { print $2 }'); answers wait for the audit fsync); log level $BENCH_LOG_LEVEL."
echo "note: no taskset pinning: redis-server, the three gateways, the upstream and the load generators share the $NCPU cores."

# ---------------------------------------------------------------- accuracy
echo
echo "1. shared-limit accuracy: agent ratecheck, rate_limit $RC_LIMIT (GCRA in Redis, burst = $RC_N), A and B driven at once"
fb0=$(( $(metric "$A_PORT" gateway_state_redis_fallbacks_total) + $(metric "$B_PORT" gateway_state_redis_fallbacks_total) ))
er0=$(( $(metric "$A_PORT" gateway_state_redis_errors_total) + $(metric "$B_PORT" gateway_state_redis_errors_total) ))
"$OUT/ratecheck" -url "$(url "$A_PORT")" -url "$(url "$B_PORT")" -token "$RC_TOKEN" -workers "$RC_WORKERS" \
	-duration "$RC_DURATION" -limit "$RC_N" -period "$RC_PERIOD" >"$TMPD/rc.out" 2>&1 || die "ratecheck failed: $(cat "$TMPD/rc.out")"
grep -v '^RESULT ' "$TMPD/rc.out" | sed 's/^/   /'
fb=$(( $(metric "$A_PORT" gateway_state_redis_fallbacks_total) + $(metric "$B_PORT" gateway_state_redis_fallbacks_total) - fb0 ))
er=$(( $(metric "$A_PORT" gateway_state_redis_errors_total) + $(metric "$B_PORT" gateway_state_redis_errors_total) - er0 ))
echo "   Redis errors during the run (A+B, /metrics): $er; local fallbacks: $fb"
RESULT=$(grep '^RESULT ' "$TMPD/rc.out")
val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$RESULT"; }
TOTAL_ERR=$(val total_err_pct)
STEADY_ERR=$(val steady_err_pct)
RC_OTHER=$(val other)
ACC_VERDICT=$(awk -v t="$TOTAL_ERR" -v s="$STEADY_ERR" -v o="$RC_OTHER" -v fb="$fb" -v lim="$TARGET_ACCURACY_PCT" 'BEGIN {
	if (t < 0) t = -t; if (s < 0) s = -s
	print (t <= lim && s <= lim && o == 0 && fb == 0) ? "PASS" : "MISS"
}')

# ---------------------------------------------------------------- latency

echo
echo "2. latency at 1 connection: wrk -t1 -c1 -d$DURATION --latency bench/post.lua, agent bench (limits on, never reached),"
echo "   gateway M (memory) and A (redis) alternating, $ROUNDS rounds, after a $WARMUP warm-up each"
for p in "$M_PORT" "$A_PORT"; do
	BENCH_TOKEN=$TOKEN wrk -t1 -c1 -d"$WARMUP" -s "$ROOT/bench/post.lua" "$(url "$p")" >/dev/null 2>&1 || true
done
LAT=$TMPD/lat.tsv
: >"$LAT"
for r in $(seq "$ROUNDS"); do
	for t in memory redis; do
		p=$M_PORT
		[ "$t" = redis ] && p=$A_PORT
		f=$OUT/wrk/redis-c1-r$r-$t.txt
		BENCH_TOKEN=$TOKEN wrk -t1 -c1 -d"$DURATION" --latency -s "$ROOT/bench/post.lua" "$(url "$p")" >"$f" 2>&1 ||
			echo "   (wrk exited non-zero: see $f)"
		read -r rps p50 p99 reqs errs < <(parse_wrk "$f")
		printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$t" "$rps" "$p50" "$p99" "$errs" >>"$LAT"
		printf '   round %s  %-6s  %8.0f req/s  p50 %7.0f us  p99 %7.0f us  errors %s\n' "$r" "$t" "$rps" "$p50" "$p99" "$errs"
	done
done
read -r MEM_P50 RED_P50 P50_DELTA LAT_ERRS < <(awk -F'\t' '
	{ p50[$1, $2] = $4; err += $6; if (!($1 in seen)) { seen[$1] = 1; n++ } }
	END {
		for (r in seen) { m += p50[r, "memory"]; x += p50[r, "redis"]; d += p50[r, "redis"] - p50[r, "memory"] }
		printf "%.0f %.0f %.0f %d\n", m / n, x / n, d / n, err
	}' "$LAT")
echo "   mean p50: memory $MEM_P50 us, redis $RED_P50 us; redis - memory (per round, averaged): $P50_DELTA us; errors $LAT_ERRS"
LAT_VERDICT=$(awk -v d="$P50_DELTA" -v e="$LAT_ERRS" -v lim="$TARGET_P50_DELTA" 'BEGIN { print (d <= lim && e == 0) ? "PASS" : "MISS" }')

for n in A:$A_PID B:$B_PID M:$M_PID redis-server:$REDIS_PID; do
	kill -0 "${n#*:}" 2>/dev/null || die "${n%%:*} died during the run"
done

# ---------------------------------------------------------------- summary
echo
echo "targets (issue 6 item 9):"
printf '   shared-limit accuracy within ±%s%% (total %+.3f%%, steady rate %+.3f%%, other statuses %s, fallbacks %s): %s\n' \
	"$TARGET_ACCURACY_PCT" "$TOTAL_ERR" "$STEADY_ERR" "$RC_OTHER" "$fb" "$ACC_VERDICT"
printf '   Redis adds <= %s us to p50 at 1 connection (%+d us): %s\n' "$TARGET_P50_DELTA" "$P50_DELTA" "$LAT_VERDICT"
echo
echo "report: $OUT/redis-report.txt  logs: $OUT/redis-*.log  wrk: $OUT/wrk/redis-*.txt"
