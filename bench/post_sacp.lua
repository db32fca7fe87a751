-- wrk script: a chat completion for the SACP agent (response_format
-- json_standard with a JSON Schema for data). The upstream answers the
-- model "bench-sacp" with a valid SACP object; the gateway injects the
-- protocol prompt, validates the answer against the schema and renders it.
-- The token comes from $BENCH_SACP_TOKEN (default bench-sacp-token).
wrk.method = "POST"
wrk.body = '{"model":"bench-sacp","messages":[{"role":"user","content":"What is six times seven?"}]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. (os.getenv("BENCH_SACP_TOKEN") or "bench-sacp-token")
