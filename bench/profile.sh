#!/usr/bin/env bash
# bench/profile.sh — CPU profiles of the gateway and of the bare proxy under
# the same wrk load as bench/run.sh, to see where the gateway's extra CPU per
# request goes.
#
#   bash bench/profile.sh                    # sse at 128 connections, 10s
#   MODE=json CONNS=1 bash bench/profile.sh
#   MODE=sacp bash bench/profile.sh           # the SACP agent (json_standard + JSON Schema)
#   MODE=json CONFIG=governed DURATION=5s bash bench/profile.sh
#   MODE=mcp CONNS=16 bash bench/profile.sh   # MCP tools/call (bench/mcpload; CONNS agents, one session each)
#
# CONFIG=governed profiles the configuration bench/ratio.sh measures (every
# governance stage on, the shipped policies; lib.sh governed_config),
# CONFIG=content the same with the content-reading chat rule; STAGE_OFF
# turns one of its stages off (see governed_config). Besides the CPU
# profile, an allocation profile of the same window is taken (two heap
# profiles, -base the first, -sample_index=alloc_space), and the target's CPU per request from /proc.
#
# The gateway is a profiling build: bench/pprof/gateway_pprof.go is compiled
# into cmd/gateway with `go build -overlay` (tag benchpprof); the gateway's
# sources are not touched. Profiles and their top lists land in bench/out/.
# Run bench/run.sh first once (it installs wrk and builds the helpers).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/bench/out
MODE=${MODE:-sse}
CONNS=${CONNS:-128}
SECONDS_=${DURATION:-10}
SECONDS_=${SECONDS_%s}
UPSTREAM_PORT=${UPSTREAM_PORT:-18181}
BARE_PORT=${BARE_PORT:-18182}
GATEWAY_PORT=${GATEWAY_PORT:-18183}
CONFIG=${CONFIG:-plain}
STAGE_OFF=${STAGE_OFF:-}
TOKEN=bench-token
die() { echo "profile.sh: $*" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
command -v wrk >/dev/null || { echo "profile.sh: wrk missing: run bench/run.sh once first" >&2; exit 1; }
mkdir -p "$OUT"

TMPD=$(mktemp -d "${TMPDIR:-/tmp}/gwprof.XXXXXX")
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMPD"
}
trap cleanup EXIT

cat >"$TMPD/overlay.json" <<EOF
{"Replace": {"$ROOT/cmd/gateway/zz_bench_pprof.go": "$ROOT/bench/pprof/gateway_pprof.go"}}
EOF
(
	cd "$ROOT"
	go build -tags benchpprof -overlay "$TMPD/overlay.json" -o "$OUT/gateway-pprof" ./cmd/gateway
	go build -o "$OUT/upstream" ./bench/upstream
	go build -o "$OUT/bareproxy" ./bench/bareproxy
	go build -o "$OUT/mcpserver" ./bench/mcpserver
	go build -o "$OUT/mcpload" ./bench/mcpload
	go build -o "$OUT/stages" ./bench/stages
)

case $CONFIG in
governed | content)
	governed_policies "$ROOT" "$TMPD"
	governed_config "$TMPD" "$GATEWAY_PORT" "$TMPD/rego-${CONFIG/governed/shipped}" "${BENCH_AUDIT_DIR:-$TMPD/work/audit}" "$STAGE_OFF"
	[ "$MODE" = mcp ] && governed_mcp "$TMPD" "$((UPSTREAM_PORT + 5))" "$CONNS"
	;;
plain)
mkdir -p "$TMPD/config" "$TMPD/work"
cat >"$TMPD/config/gateway.yaml" <<EOF
listen: "127.0.0.1:$GATEWAY_PORT"
log:
  level: warn
upstreams:
  - name: bench
    type: openai
    base_url: http://127.0.0.1:$UPSTREAM_PORT/v1
    models: ["*"]
    max_retries: 0
audit:
  dir: ${BENCH_AUDIT_DIR:-$TMPD/work/audit}
  fail_mode: closed
mcp:
  servers:
    - name: bench
      url: http://127.0.0.1:$((UPSTREAM_PORT + 5))/mcp
EOF
cat >"$TMPD/config/agents.yaml" <<EOF
agents:
  bench:
    type: benchmark
    rate_limit: 100000000/second
    token_limit: 1000000000/second
    token_sha256: "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)"
  bench-sacp:
    type: benchmark
    rate_limit: 100000000/second
    token_limit: 1000000000/second
    response_format: json_standard
    data_schema_file: sacp-data.json
    token_sha256: "$(printf %s bench-sacp-token | sha256sum | cut -d' ' -f1)"
EOF
for i in $(seq "$CONNS"); do
	cat >>"$TMPD/config/agents.yaml" <<EOF
  mcp$i:
    type: benchmark
    mcp_tools: {bench: [echo, "read_*"]}
    rate_limit: 100000000/second
    token_sha256: "$(printf %s "bench-mcp-$i" | sha256sum | cut -d' ' -f1)"
EOF
done
cat >"$TMPD/config/sacp-data.json" <<EOF
{"type": "object", "required": ["answer"], "properties": {"answer": {"type": "integer"}, "unit": {"type": "string"}}}
EOF
printf 'protocol:\n  version: "1.0"\n' >"$TMPD/config/protocol.yaml"
	;;
*) die "unknown CONFIG $CONFIG (plain, governed, content)" ;;
esac

"$OUT/upstream" -listen "127.0.0.1:$UPSTREAM_PORT" 2>"$OUT/profile-upstream.log" &
PIDS+=($!)
# The MCP server listens on UPSTREAM_PORT+5; in MODE=mcp the bare proxy
# stands in front of it instead of the chat upstream.
"$OUT/mcpserver" -listen "127.0.0.1:$((UPSTREAM_PORT + 5))" 2>"$OUT/profile-mcpserver.log" &
PIDS+=($!)
bare_up=$UPSTREAM_PORT
[ "$MODE" = mcp ] && bare_up=$((UPSTREAM_PORT + 5))
"$OUT/bareproxy" -listen "127.0.0.1:$BARE_PORT" -upstream "http://127.0.0.1:$bare_up" -pprof "127.0.0.1:$((BARE_PORT + 10))" 2>"$OUT/profile-bareproxy.log" &
PIDS+=($!)
(cd "$TMPD/work" && GATEWAY_PPROF_ADDR="127.0.0.1:$((GATEWAY_PORT + 10))" exec "$OUT/gateway-pprof" serve --config "$TMPD/config") 2>"$OUT/profile-gateway.log" &
PIDS+=($!)
for port in "$UPSTREAM_PORT" "$((UPSTREAM_PORT + 5))" "$BARE_PORT" "$GATEWAY_PORT" "$((BARE_PORT + 10))" "$((GATEWAY_PORT + 10))"; do
	for _ in $(seq 100); do
		(: </dev/tcp/127.0.0.1/"$port") 2>/dev/null && break
		sleep 0.1
	done
done

script=$ROOT/bench/post.lua
[ "$MODE" = sse ] && script=$ROOT/bench/post_sse.lua
[ "$MODE" = sacp ] && script=$ROOT/bench/post_sacp.lua
threads=2
[ "$CONNS" -lt 2 ] && threads=1
CLK_TCK=$(getconf CLK_TCK)
tag=$MODE-c$CONNS
[ "$CONFIG" = plain ] || tag=$MODE-$CONFIG${STAGE_OFF:+-no-$STAGE_OFF}-c$CONNS
for t in bare gateway; do
	port=$BARE_PORT pid=${PIDS[2]}
	[ "$t" = gateway ] && port=$GATEWAY_PORT pid=${PIDS[3]}
	url=http://127.0.0.1:$port/v1/chat/completions
	if [ "$MODE" = mcp ]; then
		url=http://127.0.0.1:$port/mcp
		[ "$t" = gateway ] && url=$url/bench
		"$OUT/mcpload" -url "$url" -token "bench-mcp-%d" -clients "$CONNS" -duration 2s >/dev/null # warm-up
		"$OUT/mcpload" -url "$url" -token "bench-mcp-%d" -clients "$CONNS" -duration "$((SECONDS_ + 2))s" >"$OUT/profile-$t-$tag.wrk.txt" &
	else
		BENCH_TOKEN=$TOKEN wrk -t2 -c32 -d2s -s "$script" "$url" >/dev/null # warm-up
		BENCH_TOKEN=$TOKEN wrk -t"$threads" -c"$CONNS" -d"$((SECONDS_ + 2))s" -s "$script" "$url" >"$OUT/profile-$t-$tag.wrk.txt" &
	fi
	wrkpid=$!
	sleep 1
	prof=$OUT/profile-$t-$tag.pprof
	# The allocation profile covers the same window as the CPU profile: two
	# heap profiles, each after a collection (the gateway's GOGC is high, and
	# a heap profile counts allocations only as of the last collection).
	curl -s -o "$OUT/profile-$t-$tag.allocs-base.pprof" "http://127.0.0.1:$((port + 10))/debug/pprof/heap?gc=1"
	b0=$(cpu_ticks "$pid")
	curl -s -o "$prof" "http://127.0.0.1:$((port + 10))/debug/pprof/profile?seconds=$SECONDS_"
	b1=$(cpu_ticks "$pid")
	curl -s -o "$OUT/profile-$t-$tag.allocs.pprof" "http://127.0.0.1:$((port + 10))/debug/pprof/heap?gc=1"
	wait "$wrkpid"
	{
		# CPU per request: the profiled window's ticks over the driver's
		# request rate in that window (it runs 2s longer than the profile).
		rps=$(awk '/^Requests\/sec:/ { print $2 } /^calls=/ { for (i = 1; i <= NF; i++) if ($i ~ /^calls_per_s=/) { sub(/^calls_per_s=/, "", $i); print $i } }' "$OUT/profile-$t-$tag.wrk.txt")
		echo "=== $t, $MODE, $CONFIG${STAGE_OFF:+ without $STAGE_OFF}, $CONNS connections: $(grep -E 'Requests/sec|^calls=' "$OUT/profile-$t-$tag.wrk.txt")," \
			"CPU $(awk -v db="$((b1 - b0))" -v hz="$CLK_TCK" -v s="$SECONDS_" -v rps="${rps:-0}" \
				'BEGIN { printf "%.1f", (rps > 0 ? db * 1e6 / hz / (rps * s) : 0) }') us/req"
		echo "--- flat"
		go tool pprof -top -nodecount=35 "$prof" 2>/dev/null | sed -n '1,45p'
		echo "--- cumulative"
		go tool pprof -top -cum -nodecount=45 "$prof" 2>/dev/null | sed -n '6,55p'
		echo "--- allocated bytes, cumulative"
		go tool pprof -top -cum -sample_index=alloc_space -nodecount=30 -base "$OUT/profile-$t-$tag.allocs-base.pprof" "$OUT/profile-$t-$tag.allocs.pprof" 2>/dev/null | sed -n '6,40p'
		if [ "$t" = gateway ] && [ "$MODE" != mcp ]; then
			# The same CPU split by governance stage, in µs per request.
			echo "--- stages"
			"$OUT/stages" -profile "$prof" -wrk "$OUT/profile-$t-$tag.wrk.txt" || true
		fi
	} | tee "$OUT/profile-$t-$tag.txt"
done
echo "profiles: $OUT/profile-*.pprof (go tool pprof -http=: FILE for a graph)"
