# Shared helpers of bench/run.sh and bench/redis.sh (sourced; each script
# defines die and OUT).

# wait_ready name pid port [path]: poll http://127.0.0.1:port/path (default
# /healthz) until it answers, or die when the process exits or 10s pass.
wait_ready() {
	local i
	for i in $(seq 100); do
		kill -0 "$2" 2>/dev/null || die "$1 exited at startup (see its log in $OUT/)"
		curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$3${4:-/healthz}" && return 0
		sleep 0.1
	done
	die "$1 not ready on port $3 after 10s"
}

# parse_wrk file -> "rps p50_us p99_us requests errors" (errors: non-2xx + socket errors)
parse_wrk() {
	awk '
	function us(v,   n, u) {
		n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
		if (u == "us") return n
		if (u == "ms") return n * 1000
		if (u == "s")  return n * 1000000
		if (u == "m")  return n * 60000000
		if (u == "h")  return n * 3600000000
		return -1
	}
	/^ *50% /             { p50 = us($2) }
	/^ *99% /             { p99 = us($2) }
	/requests in /        { reqs = $1 }
	/^Requests\/sec:/     { rps = $2 }
	/Non-2xx or 3xx/      { errs += $NF }
	/Socket errors:/      { gsub(/,/, ""); errs += $4 + $6 + $8 + $10 }
	END { printf "%.2f %.1f %.1f %d %d\n", rps, p50, p99, reqs, errs }
	' "$1"
}

# cpu_ticks pid -> utime+stime of the process in clock ticks (fields 14, 15 of
# /proc/pid/stat); divide by getconf CLK_TCK for seconds.
cpu_ticks() {
	awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# governed_config dir listen_port policy_dir audit_dir [stage_off]: writes
# dir/config for a gateway with every governance stage on (bearer auth, the
# agent's models allow-list, rate and token limits, the chat policy of
# policy_dir, redaction with every detector, the audit trail with fail_mode
# closed, the access log at info), the configuration ratio.sh measures and
# profile.sh profiles. The agent's token is $TOKEN, the upstream the mock on
# $UPSTREAM_PORT. stage_off, for an ablation, turns one stage off: limits
# (no rate or token limit), redaction (detectors: []), audit_open
# (fail_mode: open), accesslog (log level warn), mcp_policy (the MCP policy
# in policy_dir replaced by a constant allow: decided once at load).
governed_config() {
	local d=$1 level=info fail=closed rate='' redaction=''
	case ${5:-} in
	'' | limits) ;;
	redaction) redaction='  redaction:\n    detectors: []\n' ;;
	audit_open) fail=open ;;
	accesslog) level=warn ;;
	mcp_policy) printf 'package gateway.mcp\n\ndecision := {"decision": "allow", "reason": ""}\n' >"$3/gateway/mcp/mcp.rego" ;;
	*) die "governed_config: unknown stage_off ${5}" ;;
	esac
	[ "${5:-}" = limits ] || rate='    rate_limit: 100000000/second     # on, never reached
    token_limit: 1000000000/second   # on, never reached'
	mkdir -p "$d/config" "$d/work" "$4"
	cat >"$d/config/gateway.yaml" <<EOC
listen: "127.0.0.1:$2"
shutdown_timeout: 2s
log:
  level: $level
  format: json
upstreams:
  - name: bench
    type: openai
    base_url: http://127.0.0.1:$UPSTREAM_PORT/v1
    models: ["*"]
    max_retries: 0
    max_idle_conns: 512
policy:
  dir: $3
audit:
  dir: $4
  fail_mode: $fail
EOC
	cat >"$d/config/agents.yaml" <<EOC
agents:
  bench:
    type: benchmark
    capabilities: [read]
    models: [bench-model]
${rate:+$rate
}    token_sha256: "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)"
EOC
	printf 'protocol:\n  version: "1.0"\n'"$redaction" >"$d/config/protocol.yaml"
}

# governed_mcp dir mcp_server_port agents: adds to a governed_config the bench
# MCP server (bench/mcpserver) as server "bench", and agents mcp1..mcpN
# (tokens bench-mcp-1..N), each limited to the server's read tools (the
# policy and mcp_tools both decide): the MCP runs' configuration.
governed_mcp() {
	cat >>"$1/config/gateway.yaml" <<EOC
mcp:
  servers:
    - name: bench
      url: http://127.0.0.1:$2/mcp
EOC
	local i
	for i in $(seq "$3"); do
		cat >>"$1/config/agents.yaml" <<EOC
  mcp$i:
    type: benchmark
    capabilities: [read]
    mcp_tools: {bench: [echo, "read_*"]}
    rate_limit: 100000000/second
    token_sha256: "$(printf %s "bench-mcp-$i" | sha256sum | cut -d' ' -f1)"
EOC
	done
}

# governed_policies root dir: the shipped policies in dir/rego-shipped, and
# the shipped policies plus the content-reading chat rule
# (docs/examples/chat-content-policy.rego) in dir/rego-content.
governed_policies() {
	mkdir -p "$2/rego-shipped" "$2/rego-content"
	cp -r "$1/rego/gateway" "$2/rego-shipped/"
	cp -r "$1/rego/gateway" "$2/rego-content/"
	cp "$1/docs/examples/chat-content-policy.rego" "$2/rego-content/gateway/rules/chat/content.rego"
}
