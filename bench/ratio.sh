#!/usr/bin/env bash
# bench/ratio.sh — the cost of governance, as ratios to a bare reverse proxy.
#
#   bash bench/ratio.sh                   # about 4 minutes
#   DURATION=5s ROUNDS=1 bash bench/ratio.sh
#
# Three targets in front of the same mock upstream, alternating in each
# round at CONNS connections: the bare proxy; the gateway with every
# governance stage on (bearer auth, a model allow-list, rate and token
# limits, the shipped chat policy, redaction with every detector, the audit
# trail with fail_mode closed, the access log at info); and the same gateway
# with a chat rule that reads every message (docs/examples/chat-content-policy.rego).
# Then MCP tools/call load (bench/mcpload) against a bare proxy and the
# governed gateway in front of the same MCP server (bench/mcpserver): 16
# agents with a session each, and one serial client.
# Each figure is printed against its target, PASS or MISS.
#
# Environment (defaults in brackets):
#   DURATION [10s] ROUNDS [2] CONNS [128] WARMUP [2s]
#   BENCH_AUDIT_DIR [a temp dir]   the audit trail's directory (its file system is printed)
#   UPSTREAM_PORT [18091] BARE_PORT [18092] GATEWAY_PORT [18093] CONTENT_PORT [18094]
#   MCP_SERVER_PORT [18095] MCP_BARE_PORT [18096]
#   MODES [json sse mcp16 mcp1]   the runs to make (a figure whose runs are left out is n/a)
#
# Output: the report on stdout and in bench/out/ratio-report.txt; wrk outputs
# in bench/out/wrk/ratio-*.txt, process logs in bench/out/ratio-*.log.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/bench/out
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-2}
CONNS=${CONNS:-128}
WARMUP=${WARMUP:-2s}
BENCH_AUDIT_DIR=${BENCH_AUDIT_DIR:-}
UPSTREAM_PORT=${UPSTREAM_PORT:-18091}
BARE_PORT=${BARE_PORT:-18092}
GATEWAY_PORT=${GATEWAY_PORT:-18093}
CONTENT_PORT=${CONTENT_PORT:-18094}
MCP_SERVER_PORT=${MCP_SERVER_PORT:-18095}
MCP_BARE_PORT=${MCP_BARE_PORT:-18096}
MODES=${MODES:-json sse mcp16 mcp1}
TOKEN=bench-token

# The targets: what each figure must be, gateway / bare.
T_JSON_CPU=1.5      # JSON: CPU per request
T_JSON_RPS=0.75     # JSON: req/s (at least)
T_SSE_CPU=2.2       # streams: CPU per request
T_CONTENT_CPU=1.9   # JSON with the content-reading chat rule: CPU per request
T_MCP16_CPU=1.6     # MCP tools/call, 16 agents at once: CPU per call
T_MCP1_CPU=2.0      # MCP tools/call, one serial client: CPU per call
MCP_AGENTS=16

mkdir -p "$OUT/wrk"
: >"$OUT/ratio-report.txt"
exec > >(tee -a "$OUT/ratio-report.txt") 2>&1

die() { echo "ratio.sh: $*" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

command -v wrk >/dev/null || die "wrk not found (bash bench/run.sh installs it)"
CLK_TCK=$(getconf CLK_TCK)

echo "building gateway, upstream, bareproxy, mcpserver, mcpload into bench/out/ ..."
(
	cd "$ROOT"
	go build -o "$OUT/gateway" ./cmd/gateway
	go build -o "$OUT/upstream" ./bench/upstream
	go build -o "$OUT/bareproxy" ./bench/bareproxy
	go build -o "$OUT/mcpserver" ./bench/mcpserver
	go build -o "$OUT/mcpload" ./bench/mcpload
)
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

TMPD=$(mktemp -d "${TMPDIR:-/tmp}/gwratio.XXXXXX")
PIDS=()
cleanup() {
	local rc=$?
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMPD"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for port in "$UPSTREAM_PORT" "$BARE_PORT" "$GATEWAY_PORT" "$CONTENT_PORT" "$MCP_SERVER_PORT" "$MCP_BARE_PORT"; do
	if (: </dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
		die "port $port is already in use (set UPSTREAM_PORT, BARE_PORT, GATEWAY_PORT, CONTENT_PORT, MCP_SERVER_PORT, MCP_BARE_PORT)"
	fi
done

# config name port policy_dir: a governed gateway's configuration (lib.sh).
config() {
	local audit=${BENCH_AUDIT_DIR:+$BENCH_AUDIT_DIR/$1}
	governed_config "$TMPD/$1" "$2" "$3" "${audit:-$TMPD/$1/audit}"
	governed_mcp "$TMPD/$1" "$MCP_SERVER_PORT" "$MCP_AGENTS"
	"$OUT/gateway" config check --config "$TMPD/$1/config" >/dev/null || die "the generated config of $1 is invalid"
}
# The shipped policies, and the shipped policies plus the content rule.
governed_policies "$ROOT" "$TMPD"
config gateway "$GATEWAY_PORT" "$TMPD/rego-shipped"
config content "$CONTENT_PORT" "$TMPD/rego-content"

# spawn log command...: command in the background, its stderr to log; $!
# is its pid.
spawn() {
	local log=$1
	shift
	"$@" 2>"$log" &
	PIDS+=("$!")
}
spawn "$OUT/ratio-upstream.log" "$OUT/upstream" -listen "127.0.0.1:$UPSTREAM_PORT"
UP_PID=$!
spawn "$OUT/ratio-bareproxy.log" "$OUT/bareproxy" -listen "127.0.0.1:$BARE_PORT" -upstream "http://127.0.0.1:$UPSTREAM_PORT"
BARE_PID=$!
spawn "$OUT/ratio-mcpserver.log" "$OUT/mcpserver" -listen "127.0.0.1:$MCP_SERVER_PORT"
MCPS_PID=$!
spawn "$OUT/ratio-mcpbare.log" "$OUT/bareproxy" -listen "127.0.0.1:$MCP_BARE_PORT" -upstream "http://127.0.0.1:$MCP_SERVER_PORT"
MCPB_PID=$!
# The access log is on (info), as in production; it goes to a file.
(cd "$TMPD/gateway/work" && exec "$OUT/gateway" serve --config "$TMPD/gateway/config") 2>"$OUT/ratio-gateway.log" &
GW_PID=$!
PIDS+=("$GW_PID")
(cd "$TMPD/content/work" && exec "$OUT/gateway" serve --config "$TMPD/content/config") 2>"$OUT/ratio-content.log" &
CT_PID=$!
PIDS+=("$CT_PID")
wait_ready upstream "$UP_PID" "$UPSTREAM_PORT"
wait_ready bareproxy "$BARE_PID" "$BARE_PORT"
wait_ready gateway "$GW_PID" "$GATEWAY_PORT"
wait_ready content "$CT_PID" "$CONTENT_PORT"
wait_ready mcpserver "$MCPS_PID" "$MCP_SERVER_PORT"
wait_ready mcpbare "$MCPB_PID" "$MCP_BARE_PORT"

port_of() { case $1 in bare) echo "$BARE_PORT" ;; gateway) echo "$GATEWAY_PORT" ;; content) echo "$CONTENT_PORT" ;; esac; }
pid_of() { case $1 in bare) echo "$BARE_PID" ;; gateway) echo "$GW_PID" ;; content) echo "$CT_PID" ;; esac; }
url_of() { echo "http://127.0.0.1:$(port_of "$1")/v1/chat/completions"; }
# The MCP targets: the bare proxy in front of the MCP server, and the
# governed gateway's /mcp/bench in front of the same server.
mcp_url_of() { case $1 in bare) echo "http://127.0.0.1:$MCP_BARE_PORT/mcp" ;; gateway) echo "http://127.0.0.1:$GATEWAY_PORT/mcp/bench" ;; esac; }
mcp_pid_of() { case $1 in bare) echo "$MCPB_PID" ;; gateway) echo "$GW_PID" ;; esac; }
mcp_clients_of() { case $1 in mcp16) echo "$MCP_AGENTS" ;; *) echo 1 ;; esac; }
has_mode() { case " $MODES " in *" $1 "*) return 0 ;; esac; return 1; }
script_of() { case $1 in sse) echo "$ROOT/bench/post_sse.lua" ;; *) echo "$ROOT/bench/post.lua" ;; esac; }

# Sanity: the governed gateways refuse without the token, refuse a model
# off the allow-list, answer with it; the content gateway refuses a key.
for t in gateway content; do
	u=$(url_of "$t")
	code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$u" -H 'Content-Type: application/json' \
		-d '{"model":"bench-model","messages":[{"role":"user","content":"hi"}]}')
	[ "$code" = 401 ] || die "$t without a token answered $code, want 401"
	code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$u" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
		-d '{"model":"other-model","messages":[{"role":"user","content":"hi"}]}')
	[ "$code" = 403 ] || [ "$code" = 404 ] || die "$t answered $code for a model off the allow-list, want 403 or 404"
	code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$u" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
		-d '{"model":"bench-model","messages":[{"role":"user","content":"hi"}]}')
	[ "$code" = 200 ] || die "$t with the token answered $code, want 200"
done
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$(url_of content)" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
	-d '{"model":"bench-model","messages":[{"role":"user","content":"-----BEGIN PRIVATE KEY-----"}]}')
[ "$code" = 403 ] || die "content: a private key in a message answered $code, want 403 (is the content rule loaded?)"

# Sanity (MCP): the gateway answers 401 without a token, refuses a tool
# outside the agent's mcp_tools, serves calls through both targets, and
# writes mcp.result entries.
mcp_post() { # url token session body: the answer's body, then its status
	curl -s -w '\n%{http_code}' -X POST "$1" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
		${2:+-H "Authorization: Bearer $2"} ${3:+-H "Mcp-Session-Id: $3"} -d "$4"
}
code=$(mcp_post "$(mcp_url_of gateway)" "" "" '{"jsonrpc":"2.0","id":1,"method":"ping"}' | tail -1)
[ "$code" = 401 ] || die "MCP: the gateway without a token answered $code, want 401"
sid=$(curl -s -D - -o /dev/null -X POST "$(mcp_url_of gateway)" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
	-H "Authorization: Bearer bench-mcp-1" \
	-d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"ratio","version":"1"}}}' |
	tr -d '\r' | awk -F': ' 'tolower($1) == "mcp-session-id" { print $2 }')
[ -n "$sid" ] || die "MCP: the gateway opened no session"
answer=$(mcp_post "$(mcp_url_of gateway)" bench-mcp-1 "$sid" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{}}}')
[[ $answer == *'"error"'* ]] || die "MCP: the gateway did not refuse a tool outside mcp_tools: $answer"
for t in bare gateway; do
	"$OUT/mcpload" -url "$(mcp_url_of "$t")" -token "bench-mcp-%d" -clients 2 -duration 200ms >"$OUT/ratio-mcpload-check.txt" 2>&1 ||
		die "MCP: mcpload against $t failed: $(tail -2 "$OUT/ratio-mcpload-check.txt")"
done
gw_audit=${BENCH_AUDIT_DIR:+$BENCH_AUDIT_DIR/gateway}
# (grep reads the files itself: with pipefail, cat | grep -q fails when
# grep stops reading early.)
grep -qs '"mcp.result"' "${gw_audit:-$TMPD/gateway/audit}"/*.jsonl ||
	die "MCP: no mcp.result entry in the gateway's audit trail"

RESULTS=$OUT/ratio-results.tsv
printf 'mode\tround\ttarget\trps\tcpu_us_req\trequests\terrors\n' >"$RESULTS"
run_one() { # target mode round
	local t=$1 mode=$2 r=$3 pid f b0 b1
	pid=$(pid_of "$t")
	f=$OUT/wrk/ratio-$mode-r$r-$t.txt
	b0=$(cpu_ticks "$pid")
	BENCH_TOKEN=$TOKEN wrk -t2 -c"$CONNS" -d"$DURATION" --latency -s "$(script_of "$mode")" "$(url_of "$t")" >"$f" 2>&1 ||
		echo "  (wrk exited non-zero: see $f)"
	b1=$(cpu_ticks "$pid")
	kill -0 "$pid" 2>/dev/null || die "$t died during the run"
	read -r rps _ _ reqs errs < <(parse_wrk "$f")
	awk -v m="$mode" -v r="$r" -v t="$t" -v rps="$rps" -v reqs="$reqs" -v errs="$errs" -v db="$((b1 - b0))" -v hz="$CLK_TCK" 'BEGIN {
		printf "%s\t%s\t%s\t%.0f\t%.1f\t%d\t%d\n", m, r, t, rps, (reqs > 0 ? db * 1e6 / hz / reqs : 0), reqs, errs
	}' >>"$RESULTS"
	tail -1 "$RESULTS" | awk -F'\t' '{ printf "  %-5s round %s  %-8s %8s req/s  cpu %6s us/req  errors %s\n", $1, $2, $3, $4, $5, $7 }'
}
# audit_counter name: the gateway's audit counter (gateway_audit_NAME_total).
audit_counter() {
	curl -s "http://127.0.0.1:$GATEWAY_PORT/metrics" | awk -v n="gateway_audit_$1_total" '$1 == n || index($1, n "{") == 1 { s += $2 } END { print s + 0 }'
}
# run_mcp target mode round: mcpload's calls/s and the target's CPU per
# call; beside them the MCP server's own CPU per call (it should be the
# same for both targets) and, for the gateway, audit entries per fsync.
run_mcp() {
	local t=$1 mode=$2 r=$3 pid f b0 b1 s0 s1 e0 e1 y0 y1
	pid=$(mcp_pid_of "$t")
	f=$OUT/wrk/ratio-$mode-r$r-$t.txt
	e0=$(audit_counter entries)
	y0=$(audit_counter fsyncs)
	b0=$(cpu_ticks "$pid")
	s0=$(cpu_ticks "$MCPS_PID")
	"$OUT/mcpload" -url "$(mcp_url_of "$t")" -token "bench-mcp-%d" -clients "$(mcp_clients_of "$mode")" -duration "$DURATION" >"$f" 2>&1 ||
		echo "  (mcpload exited non-zero: see $f)"
	b1=$(cpu_ticks "$pid")
	s1=$(cpu_ticks "$MCPS_PID")
	e1=$(audit_counter entries)
	y1=$(audit_counter fsyncs)
	kill -0 "$pid" 2>/dev/null || die "$t died during the run"
	awk -v m="$mode" -v r="$r" -v t="$t" -v db="$((b1 - b0))" -v ds="$((s1 - s0))" -v hz="$CLK_TCK" -v res="$RESULTS" \
		-v per="$([ "$t" = gateway ] && awk -v e="$((e1 - e0))" -v y="$((y1 - y0))" 'BEGIN { if (y > 0) printf "  entries/fsync %.1f", e / y }')" '
	/^calls=/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
	END {
		n = v["calls"] + 0
		printf "%s\t%s\t%s\t%.0f\t%.1f\t%d\t%d\n", m, r, t, v["calls_per_s"], (n > 0 ? db * 1e6 / hz / n : 0), n, v["errors"] + (n > 0 ? 0 : 1) >> res
		printf "  %-5s round %s  %-8s %8.0f calls/s  cpu %6.1f us/call  p50 %s us  server cpu %.1f us/call  errors %d%s\n",
			m, r, t, v["calls_per_s"], (n > 0 ? db * 1e6 / hz / n : 0), v["p50_us"], (n > 0 ? ds * 1e6 / hz / n : 0), v["errors"], per
	}' "$f"
}

echo
echo "=== the cost of governance — $(date -u '+%Y-%m-%d %H:%M:%SZ') ==="
echo "tree: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$( [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] && echo ' + uncommitted changes')"
echo "machine: $(nproc) cores, load average at start: $(cut -d' ' -f1-3 /proc/loadavg); audit on $(df -T "${BENCH_AUDIT_DIR:-$TMPD}" | awk 'NR == 2 { print $2 }')"
echo "runs: $CONNS connections, DURATION=$DURATION, ROUNDS=$ROUNDS; in each round bare, gateway, content run in turn."
echo "warm-up ($WARMUP per target and mode)..."
for mode in json sse; do
	has_mode "$mode" || continue
	for t in bare gateway content; do
		BENCH_TOKEN=$TOKEN wrk -t2 -c32 -d"$WARMUP" -s "$(script_of "$mode")" "$(url_of "$t")" >/dev/null 2>&1 || true
	done
done
if has_mode mcp16 || has_mode mcp1; then
	for t in bare gateway; do
		"$OUT/mcpload" -url "$(mcp_url_of "$t")" -token "bench-mcp-%d" -clients "$MCP_AGENTS" -duration "$WARMUP" >/dev/null 2>&1 || true
	done
fi
for r in $(seq "$ROUNDS"); do
	if has_mode json; then for t in bare gateway content; do run_one "$t" json "$r"; done; fi
	if has_mode sse; then for t in bare gateway; do run_one "$t" sse "$r"; done; fi
	for mode in mcp16 mcp1; do
		if has_mode "$mode"; then for t in bare gateway; do run_mcp "$t" "$mode" "$r"; done; fi
	done
done

# Each ratio is taken within a round (the same minute of the same machine)
# and averaged over the rounds.
echo
echo "figure                                   target     measured   rounds"
echo "--------------------------------------------------------------------------"
awk -F'\t' -v jc="$T_JSON_CPU" -v jr="$T_JSON_RPS" -v sc="$T_SSE_CPU" -v cc="$T_CONTENT_CPU" -v m16="$T_MCP16_CPU" -v m1="$T_MCP1_CPU" '
NR == 1 { next }
{ rps[$1, $2, $3] = $4; cpu[$1, $2, $3] = $5; if ($2 > nr) nr = $2; if ($7 > 0) errs[$3] += $7 }
function ratio(mode, t, what,   s, n, r, b) {
	s = n = 0
	for (r = 1; r <= nr; r++) {
		b = what == "cpu" ? cpu[mode, r, "bare"] : rps[mode, r, "bare"]
		if (b > 0 && ((mode, r, t) in cpu)) { s += (what == "cpu" ? cpu[mode, r, t] : rps[mode, r, t]) / b; n++ }
	}
	return n ? s / n : -1
}
function row(name, v, target, atleast,   ok) {
	ok = atleast ? v >= target : v <= target
	printf "%-40s %s%-8s %7.2fx   %d   %s\n", name, atleast ? ">=" : "<=", target "x", v, nr, v < 0 ? "n/a" : (ok ? "PASS" : "MISS")
}
END {
	row("JSON, CPU per request", ratio("json", "gateway", "cpu"), jc, 0)
	row("JSON, req/s", ratio("json", "gateway", "rps"), jr, 1)
	row("streams, CPU per request", ratio("sse", "gateway", "cpu"), sc, 0)
	row("JSON + content rule, CPU per request", ratio("json", "content", "cpu"), cc, 0)
	row("MCP tool call, 16 agents, CPU", ratio("mcp16", "gateway", "cpu"), m16, 0)
	row("MCP tool call, serial client, CPU", ratio("mcp1", "gateway", "cpu"), m1, 0)
	for (t in errs) printf "note: %s had %d errors (non-2xx or socket) over the runs\n", t, errs[t]
}' "$RESULTS"
