-- wrk script: the same chat completion with "stream":true (SSE answer: the
-- mock upstream sends 5 content chunks, a finish chunk and data: [DONE]).
-- wrk reads each chunked response to its end, so latency is the whole stream.
wrk.method = "POST"
wrk.body = '{"model":"bench-model","stream":true,"messages":[{"role":"user","content":"Say hello."}]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "text/event-stream"
wrk.headers["Authorization"] = "Bearer " .. (os.getenv("BENCH_TOKEN") or "bench-token")
