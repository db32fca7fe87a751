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
