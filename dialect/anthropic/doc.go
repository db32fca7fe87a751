// Package anthropic is the Anthropic Messages API (POST /v1/messages,
// version 2023-06-01) as a dialect at the edge of the gateway: Request
// translates what the Anthropic SDKs and Claude-based agents send into the
// neutral form, an OpenAI Chat Completions request, which the one pipeline
// governs and sends; Response, Stream and Error translate what comes back
// (a chat completion, an SSE chunk stream, an error body) into Anthropic's
// wire format. The package is pure translation: no I/O beyond the writer a
// Stream is given, no project imports.
//
// # Reading the request
//
// The body is read once, strictly (a client's request is untrusted input
// and what the gateway governs must be what the client meant): valid UTF-8,
// one JSON object, no member name twice at any depth, no member the
// package does not know at any depth. A field whose meaning the
// translation would drop is refused, never ignored. The accepted fields:
//
//	model             required, non-empty                    → model
//	max_tokens        required, integer ≥ 1                  → max_tokens
//	messages          required, non-empty                    → messages
//	  role            user | assistant
//	  content         string, or blocks:
//	    text          {text, cache_control, citations: null|[]}
//	                                                         → the content string when it is the only
//	                                                           block, else a text part
//	    image         {source: {type: base64, media_type, data} | {type: url, url}, cache_control}
//	                  (user turns)                           → image_url part (a data: URL for base64)
//	    tool_use      {id, name, input: object, cache_control}
//	                  (assistant turns)                      → tool_calls[] {id, function {name, arguments}}
//	    tool_result   {tool_use_id, content: string | text blocks, is_error, cache_control}
//	                  (user turns, before any other block)   → a "tool" message per result,
//	                                                           the text blocks joined by "\n"
//	    thinking, redacted_thinking (assistant turns)        → dropped (see below)
//	system            string, or text blocks                 → one system message, first
//	                                                           (blocks joined by "\n"; "" → none)
//	metadata          {user_id}                              → user
//	stop_sequences    strings                                → stop
//	stream            bool                                   → stream, stream_options.include_usage
//	temperature       number in [0, 1]                       → temperature
//	top_p             number in [0, 1]                       → top_p
//	tools             {name, description, input_schema, cache_control, type: custom}
//	                                                         → function tools
//	tool_choice       {type: auto|any|tool|none, name, disable_parallel_tool_use}
//	                                                         → auto | required | {function {name}} | none,
//	                                                           parallel_tool_calls: false
//	thinking          {type: enabled, budget_tokens} | {type: disabled} | {type: adaptive}
//	                                                         → dropped (see below)
//	top_k             refused (see below)
//
// Everything else (service_tier, container, mcp_servers, document and
// search_result blocks, server tools such as web_search, image sources of
// type file, ...) is refused with an error naming the field.
//
// # Decisions
//
//   - top_k is refused: the neutral form has no top-k sampling, and a
//     client that set it (top_k: 1 for near-greedy answers, say) would get
//     differently sampled answers without knowing. null is accepted.
//   - thinking is accepted and dropped: it asks the model to reason before
//     answering, and the answer simply carries no thinking blocks, which
//     the API allows (the blocks are the model's option, never promised).
//     Refusing it would shut out Claude-based agents that always send it.
//     thinking and redacted_thinking blocks in assistant turns are dropped
//     too: Anthropic itself ignores earlier turns' thinking, and this
//     gateway never produced them.
//   - cache_control is accepted and dropped wherever Anthropic allows it:
//     it is a hint about the provider's prompt cache, never about the
//     answer, and OpenAI-form upstreams cache prefixes on their own.
//   - A final assistant turn (a prefill, which Anthropic continues) is
//     refused: a chat completion starts a new turn instead, so the client
//     would glue the prefill to an answer that does not continue it.
//   - An image in a tool_result is refused: OpenAI tool messages carry text
//     only. is_error: true prefixes the result's text with "[tool error] ".
//   - temperature and top_p keep Anthropic's range [0, 1]: OpenAI's
//     temperature goes to 2, so a larger value would not be refused
//     upstream; it would mean something Anthropic never allowed.
//
// # Translating the answer
//
//   - The message id is "msg_" and the completion's id without its
//     "chatcmpl-" prefix (a completion without an id gets a digest of its
//     JSON, of the first chunk in a stream, so the id is stable); tool call
//     ids pass as they are, so a later tool_result names the call the
//     upstream knows.
//   - stop_reason: stop → end_turn (tool_use when the answer has tool
//     calls), length → max_tokens, tool_calls and function_call →
//     tool_use, content_filter → refusal (Anthropic's stop reason for an
//     answer its safety filters cut short; end_turn would pass a cut answer
//     off as complete). A missing or unknown finish_reason is an error:
//     the answer may be incomplete. stop_sequence is always null: the
//     OpenAI form does not say which stop sequence matched, so a stop on
//     one reads as end_turn.
//   - usage: output_tokens is completion_tokens. input_tokens is
//     prompt_tokens less prompt_tokens_details.cached_tokens, reported as
//     cache_read_input_tokens when present: in Anthropic's usage the three
//     input counts add up (input_tokens excludes cache reads), while
//     OpenAI's prompt_tokens includes them; passing prompt_tokens on as
//     input_tokens would count cached tokens twice for every client that
//     adds them up (context-window and cost accounting do).
//   - A tool call's arguments must be a JSON object (Anthropic's input is
//     one); anything else is an error rather than an invented input. The
//     same holds in a stream, checked when the block closes.
//   - Fields of the answer with no Anthropic equivalent (logprobs,
//     reasoning_content, annotations, system_fingerprint) are not carried.
//
// Errors map by HTTP status (see Error); in a stream, by the OpenAI error
// type (see Stream).
package anthropic
