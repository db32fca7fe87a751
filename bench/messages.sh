#!/usr/bin/env bash
# bench/messages.sh — load benchmark of agent-to-agent traffic: a REQUEST
# relayed to an agent's endpoint and its RESPONSE returned, through the
# gateway (POST /relay/messages: identity, rate limit, envelope checks both
# ways, RBAC, messages.deny, history, audit) against a bare reverse proxy in
# front of the same recipient, in the same run.
#
#   bash bench/messages.sh              # about 2 minutes
#   DURATION=5s bash bench/messages.sh
#
# Environment (defaults in brackets):
#   DURATION [10s]  CONNS ["1 32"]  ROUNDS [2]
#   BENCH_AUDIT_DIR [a temp dir]  the gateway's audit.dir (fail_mode closed: every answer
#                   waits for an fsync; /dev/shm/... takes the disk out of the figures)
#   FAIL_MODE [closed]  audit.fail_mode of the gateway
#   RECIPIENT_PORT [18084] BARE_PORT [18085] GATEWAY_PORT [18086]
#
# Output: the report on stdout and in bench/out/messages-report.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/bench/out
DURATION=${DURATION:-10s}
CONNS=${CONNS-"1 32"}
ROUNDS=${ROUNDS:-2}
FAIL_MODE=${FAIL_MODE:-closed}
BENCH_AUDIT_DIR=${BENCH_AUDIT_DIR:-}
RECIPIENT_PORT=${RECIPIENT_PORT:-18084}
BARE_PORT=${BARE_PORT:-18085}
GATEWAY_PORT=${GATEWAY_PORT:-18086}
TOKEN=bench-token

mkdir -p "$OUT/wrk"
: >"$OUT/messages-report.txt"
exec > >(tee -a "$OUT/messages-report.txt") 2>&1

die() { echo "messages.sh: $*" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

command -v wrk >/dev/null || die "wrk not found (apt-get install -y wrk)"
command -v curl >/dev/null || die "curl not found"
CLK_TCK=$(getconf CLK_TCK)

echo "building gateway, bareproxy, recipient into bench/out/ ..."
(
	cd "$ROOT"
	go build -o "$OUT/gateway" ./cmd/gateway
	go build -o "$OUT/bareproxy" ./bench/bareproxy
	go build -o "$OUT/recipient" ./bench/recipient
)

TMPD=$(mktemp -d "${TMPDIR:-/tmp}/gwmsg.XXXXXX")
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

mkdir -p "$TMPD/config" "$TMPD/work"
AUDIT_DIR=${BENCH_AUDIT_DIR:-$TMPD/work/audit}
mkdir -p "$AUDIT_DIR"
cat >"$TMPD/config/gateway.yaml" <<YAML
listen: "127.0.0.1:$GATEWAY_PORT"
shutdown_timeout: 2s
log:
  level: ${BENCH_LOG_LEVEL:-warn}
upstreams:
  - {name: mock, type: mock, models: ["*"]}
audit:
  dir: $AUDIT_DIR
  fail_mode: $FAIL_MODE
YAML
cat >"$TMPD/config/agents.yaml" <<YAML
agents:
  orch:
    type: orchestrator
    rate_limit: 100000000/second     # on, never reached
    token_sha256: "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)"
    messages:
      - to: [planner]
        actions: [plan_workflow]
  planner:
    type: planner
    token_sha256: "$(printf %s "planner-token" | sha256sum | cut -d' ' -f1)"
    endpoint: http://127.0.0.1:$RECIPIENT_PORT/messages
YAML
printf 'protocol:\n  version: "1.0"\n' >"$TMPD/config/protocol.yaml"
cp "$ROOT/config/registry.yaml" "$TMPD/config/"
"$OUT/gateway" config check --config "$TMPD/config" >/dev/null || die "the generated gateway config is invalid"

"$OUT/recipient" -listen "127.0.0.1:$RECIPIENT_PORT" 2>"$OUT/recipient.log" &
RCP_PID=$!
PIDS+=("$RCP_PID")
"$OUT/bareproxy" -listen "127.0.0.1:$BARE_PORT" -upstream "http://127.0.0.1:$RECIPIENT_PORT" 2>"$OUT/bareproxy-messages.log" &
BARE_PID=$!
PIDS+=("$BARE_PID")
(cd "$TMPD/work" && exec "$OUT/gateway" serve --config "$TMPD/config") 2>"$OUT/gateway-messages.log" &
GW_PID=$!
PIDS+=("$GW_PID")
wait_ready recipient "$RCP_PID" "$RECIPIENT_PORT"
wait_ready bareproxy "$BARE_PID" "$BARE_PORT"
wait_ready gateway "$GW_PID" "$GATEWAY_PORT"

url_of() { case $1 in bare) echo "http://127.0.0.1:$BARE_PORT/messages" ;; gateway) echo "http://127.0.0.1:$GATEWAY_PORT/relay/messages" ;; esac; }
pid_of() { case $1 in bare) echo "$BARE_PID" ;; gateway) echo "$GW_PID" ;; esac; }

# Sanity: the gateway authenticates, relays and returns the RESPONSE.
one='{"message_id":"sanity_1","message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_sanity","action":"plan_workflow","payload":{}}'
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$(url_of gateway)" -H 'Content-Type: application/json' -d "$one")
[ "$code" = 401 ] || die "gateway without a token answered $code, want 401"
answer=$(curl -s -X POST "$(url_of gateway)" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d "$one")
grep -q '"in_reply_to":"sanity_1"' <<<"$answer" || die "gateway did not relay the RESPONSE: $answer"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$(url_of gateway)" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d "$one")
[ "$code" = 409 ] || die "a repeated message_id answered $code, want 409"

echo
echo "agent-to-agent relay, $DURATION per run, audit fail_mode $FAIL_MODE on $(df -T "$AUDIT_DIR" | awk 'NR==2{print $2}')"
printf '%-8s %5s %5s %10s %9s %9s %12s %7s\n' target conns round req/s p50_us p99_us cpu_us/req errors
declare -A RPS CPU P50
for c in $CONNS; do
	threads=1
	[ "$c" -ge 2 ] && threads=2
	for r in $(seq "$ROUNDS"); do
		for t in bare gateway; do
			pid=$(pid_of "$t")
			before=$(cpu_ticks "$pid")
			f="$OUT/wrk/messages-$t-c$c-r$r.txt"
			BENCH_TOKEN=$TOKEN wrk -t"$threads" -c"$c" -d"$DURATION" --latency -s "$ROOT/bench/messages.lua" "$(url_of "$t")" -- "run$$-$t-c$c-r$r" >"$f"
			after=$(cpu_ticks "$pid")
			read -r rps p50 p99 reqs errs < <(parse_wrk "$f")
			cpu=$(awk -v t=$((after - before)) -v hz="$CLK_TCK" -v n="$reqs" 'BEGIN { printf "%.1f", n ? t / hz * 1e6 / n : 0 }')
			printf '%-8s %5s %5s %10s %9s %9s %12s %7s\n' "$t" "$c" "$r" "$rps" "$p50" "$p99" "$cpu" "$errs"
			RPS[$t,$c]="${RPS[$t,$c]:-} $rps"
			CPU[$t,$c]="${CPU[$t,$c]:-} $cpu"
			P50[$t,$c]="${P50[$t,$c]:-} $p50"
		done
	done
done
echo
echo "gateway / bare (mean over rounds):"
for c in $CONNS; do
	awk -v c="$c" -v gr="${RPS[gateway,$c]}" -v br="${RPS[bare,$c]}" -v gc="${CPU[gateway,$c]}" -v bc="${CPU[bare,$c]}" -v gp="${P50[gateway,$c]}" -v bp="${P50[bare,$c]}" '
	function mean(s,   a, n, i, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) t += a[i]; return n ? t / n : 0 }
	BEGIN { printf "  %3s conns: req/s %.2fx, CPU/request %.2fx, p50 %+.0f us\n", c, mean(gr) / mean(br), mean(gc) / mean(bc), mean(gp) - mean(bp) }'
done
