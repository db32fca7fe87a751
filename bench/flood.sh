#!/usr/bin/env bash
# bench/flood.sh — what an unauthenticated flood costs: the audit trail's
# growth in bytes per second while wrk sends wrong tokens as fast as it can,
# and the req/s of a valid agent (at another source address) during the
# flood against the same agent alone.
#
#   bash bench/flood.sh               # two 10 s phases
#   DURATION=5s bash bench/flood.sh
#
# Environment: DURATION [10s], FLOOD_CONNS [64], AGENT_CONNS [8],
# UPSTREAM_PORT [18091], GATEWAY_PORT [18093]. Traffic goes to loopback only:
# the flood (bench/floodload) from source address 127.0.0.2, the agent (wrk)
# from 127.0.0.1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/bench/out/flood
DURATION=${DURATION:-10s}
FLOOD_CONNS=${FLOOD_CONNS:-64}
AGENT_CONNS=${AGENT_CONNS:-8}
UPSTREAM_PORT=${UPSTREAM_PORT:-18091}
GATEWAY_PORT=${GATEWAY_PORT:-18093}
TOKEN=bench-token
mkdir -p "$OUT"
die() { echo "flood.sh: $*" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
command -v wrk >/dev/null || die "wrk is not installed (apt-get install wrk)"

PIDS=()
TMPD=$(mktemp -d)
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMPD"; }
trap cleanup EXIT

(cd "$ROOT" && go build -o "$OUT/gateway" ./cmd/gateway && go build -o "$OUT/upstream" ./bench/upstream && go build -o "$OUT/floodload" ./bench/floodload)
mkdir -p "$TMPD/config" "$TMPD/work/audit"
cat >"$TMPD/config/gateway.yaml" <<YAML
listen: "127.0.0.1:$GATEWAY_PORT"
log: {level: warn}
upstreams:
  - {name: bench, type: openai, base_url: "http://127.0.0.1:$UPSTREAM_PORT/v1", models: ["*"], max_retries: 0}
audit:
  dir: $TMPD/work/audit
YAML
cat >"$TMPD/config/agents.yaml" <<YAML
agents:
  bench:
    type: benchmark
    rate_limit: 100000000/second
    token_sha256: "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)"
YAML
printf 'protocol:\n  version: "1.0"\n' >"$TMPD/config/protocol.yaml"

"$OUT/upstream" -listen "127.0.0.1:$UPSTREAM_PORT" 2>"$OUT/upstream.log" &
PIDS+=($!); UP_PID=$!
(cd "$TMPD/work" && exec "$OUT/gateway" serve --config "$TMPD/config") 2>"$OUT/gateway.log" &
PIDS+=($!); GW_PID=$!
wait_ready upstream "$UP_PID" "$UPSTREAM_PORT"
wait_ready gateway "$GW_PID" "$GATEWAY_PORT"

trail_bytes() { du -sb "$TMPD/work/audit" | cut -f1; }
secs=${DURATION%s}

echo "== the agent alone ($AGENT_CONNS connections, $DURATION)"
BENCH_TOKEN=$TOKEN wrk -t2 -c"$AGENT_CONNS" -d"$DURATION" --latency -s "$ROOT/bench/post.lua" "http://127.0.0.1:$GATEWAY_PORT/v1/chat/completions" >"$OUT/alone.txt"
read -r alone_rps _ _ _ alone_err < <(parse_wrk "$OUT/alone.txt")

echo "== the flood alone: wrong tokens on $FLOOD_CONNS connections from 127.0.0.2"
before=$(trail_bytes)
"$OUT/floodload" -from 127.0.0.2 -c "$FLOOD_CONNS" -d "$DURATION" -url "http://127.0.0.1:$GATEWAY_PORT/v1/chat/completions" >"$OUT/flood-alone.txt"
after=$(trail_bytes)
flood_growth=$(( (after - before) / secs ))
failures=$(cat "$TMPD"/work/audit/*.jsonl | grep -c '"auth.failure"' || true)

echo "== the agent during the flood"
"$OUT/floodload" -from 127.0.0.2 -c "$FLOOD_CONNS" -d "$DURATION" -url "http://127.0.0.1:$GATEWAY_PORT/v1/chat/completions" >"$OUT/flood.txt" &
FLOOD=$!
BENCH_TOKEN=$TOKEN wrk -t2 -c"$AGENT_CONNS" -d"$DURATION" --latency -s "$ROOT/bench/post.lua" "http://127.0.0.1:$GATEWAY_PORT/v1/chat/completions" >"$OUT/during.txt"
wait "$FLOOD"
read -r during_rps _ _ _ during_err < <(parse_wrk "$OUT/during.txt")

echo
echo "flood alone (wrong token, from 127.0.0.2): $(cat "$OUT/flood-alone.txt")"
echo "audit trail growth during the flood alone: $flood_growth bytes/s ($failures auth.failure entries)"
echo "flood beside the agent: $(cat "$OUT/flood.txt")"
echo "valid agent: alone $alone_rps req/s (errors $alone_err), during the flood $during_rps req/s (errors $during_err)"
