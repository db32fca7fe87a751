-- wrk script: a small non-streaming chat completion (JSON answer).
-- The token comes from $BENCH_TOKEN (default bench-token); the bare proxy
-- ignores it, the gateway authenticates it.
wrk.method = "POST"
wrk.body = '{"model":"bench-model","messages":[{"role":"user","content":"Say hello."}]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. (os.getenv("BENCH_TOKEN") or "bench-token")
