-- wrk script: seed 002's step 1 as an ACL REQUEST, with a message_id of its
-- own per request (the gateway refuses a repeated id) and a workflow per
-- 4,000 requests (a thread holds at most 10,000 messages). Ids are unique
-- across runs through the run id passed after "--" (messages.sh gives one).
-- The bare proxy ignores the token and the ids; the recipient replies to
-- the id either way.
local counter = 0
local thread_id = 0

function setup(thread)
	thread:set("tid", thread_id)
	thread_id = thread_id + 1
end

function init(args)
	prefix = (args[1] or tostring(os.time())) .. "_t" .. tostring(tid)
end

function request()
	counter = counter + 1
	local body = '{"message_id":"' .. prefix .. '_' .. counter .. '","message_type":"request","sender_id":"orch",' ..
		'"sender_type":"orchestrator","receiver_id":"planner","receiver_type":"planner",' ..
		'"workflow_id":"wf_' .. prefix .. '_' .. math.floor(counter / 4000) .. '","action":"plan_workflow",' ..
		'"payload":{"operation":"update","target_customer_id":"CUST001","parameters":{"credit_limit":100000}},"priority":"high"}'
	return wrk.format("POST", nil, {
		["Content-Type"] = "application/json",
		["Authorization"] = "Bearer " .. (os.getenv("BENCH_TOKEN") or "bench-token"),
	}, body)
end
