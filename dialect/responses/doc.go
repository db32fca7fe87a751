// Package responses is the OpenAI Responses API (POST /v1/responses, what
// current OpenAI SDKs and agent frameworks send by default) as a dialect at
// the edge of the gateway: Request translates what a client sends into the
// neutral form, an OpenAI Chat Completions request, which the one pipeline
// governs and sends; Response, Stream and Error translate what comes back
// (a chat completion, an SSE chunk stream, an error body) into the
// Responses wire format. The package is pure translation: no I/O beyond
// the writer a Stream is given and the Keep callback its caller passes,
// no project imports. Continuing a response (previous_response_id) is a
// translation too (see "Continuing a response"); where conversations are
// kept, and for whom, is the caller's (the gateway's proxy package).
//
// # Reading the request
//
// The body is read once, strictly (a client's request is untrusted input
// and what the gateway governs must be what the client meant): valid UTF-8,
// one JSON object, no member name twice at any depth, no member the
// package does not know at any depth. A field whose meaning the
// translation would drop is refused, never ignored. The accepted fields:
//
//	model                 required, non-empty                  → model
//	instructions          string                               → a system message, first ("" → none)
//	input                 required: a string                   → one user message (non-empty)
//	                      or items (at least one):
//	  message             {type: message (or absent), role, content, id, status}
//	    role              user | system | developer | assistant → the same role
//	    content           string (non-empty), or parts:
//	      input_text      {text} (user, system, developer)     → the content string when it is the
//	                                                             only part, else a text part
//	      input_image     {image_url, detail} (user)           → image_url part {url, detail}
//	      output_text     {text, annotations: [], logprobs: []} (assistant)
//	                                                           → as input_text
//	      refusal         {refusal} (assistant)                → as input_text, the refusal its text
//	  function_call       {call_id, name, arguments, id, status}
//	                                                           → tool_calls[] {id: call_id, function {name, arguments}}
//	                                                             of the assistant message before it, or of
//	                                                             a new one with content null
//	  function_call_output {call_id, output: string | input_text parts, id, status}
//	                                                           → a "tool" message, tool_call_id = call_id
//	max_output_tokens     integer ≥ 1                          → max_tokens
//	temperature           number in [0, 2]                     → temperature
//	top_p                 number in [0, 1]                     → top_p
//	tools                 {type: function, name, description, parameters, strict}
//	                                                           → function tools
//	tool_choice           auto | none | required | {type: function, name}
//	                                                           → the same, {type: function, function {name}}
//	parallel_tool_calls   bool                                 → parallel_tool_calls (with tools)
//	text                  {format: {type: text} | {type: json_object}
//	                               | {type: json_schema, name, schema, description, strict},
//	                       verbosity: low | medium | high}     → response_format (none for text), verbosity
//	reasoning             {effort, summary, generate_summary}  → reasoning_effort; summaries dropped
//	stream                bool                                 → stream, stream_options.include_usage
//	user                  string                               → user
//	metadata              ≤ 16 string pairs                    → dropped (see below)
//	store                 bool                                 → Turn.Store: false keeps nothing (see below)
//	previous_response_id  string (non-empty)                   → Turn.PreviousResponseID: the kept
//	                                                             conversation goes between the
//	                                                             instructions and the input (see below)
//	truncation            disabled                             → nothing (the neutral form's own behavior)
//	include               [] or [reasoning.encrypted_content]  → nothing
//	background            false                                → nothing
//	conversation          null only                            (see below)
//
// Everything else is refused with an error naming the field: built-in
// tools (web_search, file_search, computer_use, mcp, code_interpreter,
// ...) and tool choices of those types, input items other than the three
// above (reasoning, item_reference, the built-in tools' calls, ...),
// input_file and input_audio parts, image file_id, and the members the API
// has that the neutral form cannot say (prompt, service_tier,
// top_logprobs, max_tool_calls, prompt_cache_key, safety_identifier,
// stream_options, ...: unknown fields).
//
// # Decisions
//
//   - previous_response_id is the one server-side state the gateway keeps
//     (see "Continuing a response"). conversation (anything but null) and
//     background: true are refused, failing closed: they need
//     conversation objects or runs to poll, which the gateway does not
//     keep. A later upstream type that speaks Responses natively may pass
//     them through.
//   - store: false keeps nothing (the response cannot be continued; the
//     request may still continue an earlier one); true or absent keeps
//     the conversation for the caller's time to live. Nothing else is
//     retrievable (there is no GET /v1/responses/{id}), so metadata
//     (checked against the API's limits) is dropped: it would label a
//     stored response nobody can list.
//   - truncation: auto is refused (the neutral form cannot drop input items
//     to fit the window); include may hold only
//     reasoning.encrypted_content (what stateless clients such as the
//     Codex CLI ask for: the answer has no reasoning items, so there is
//     none to include); anything else is refused.
//   - reasoning.effort passes on as reasoning_effort; reasoning.summary
//     (and the deprecated generate_summary) is accepted and dropped: the
//     answer simply has no reasoning item, which the API allows (a summary
//     is the model's option, never promised).
//   - A function tool's strict passes on when given; absent or null, it is
//     left out, so the neutral form's default (not strict) applies, while
//     the Responses API documents strict as its default. Forcing strict
//     would make upstreams refuse the many schemas that are not
//     strict-compatible; agents that want strict say so (the OpenAI Agents
//     SDK does).
//   - tool_choice auto or none without tools is dropped (it is what the
//     answer does anyway, and the neutral form refuses a choice without
//     tools); required or a function without tools is refused.
//     parallel_tool_calls without tools is dropped likewise.
//   - Consecutive function_call items, and an assistant message right
//     before them, are one assistant message: the neutral form needs a
//     turn's calls in one message, followed by their tool messages. Their
//     arguments pass as the strings they are (the API carries them as
//     strings; the upstream reads them).
//   - id and status of replayed output items are accepted and dropped:
//     the neutral form has no item ids. Annotations and logprobs of
//     replayed output_text are accepted only empty.
//   - A refusal part replayed in an assistant message becomes its text:
//     the model sees what it said before.
//   - developer messages stay developer messages, which the neutral form
//     knows.
//   - max_output_tokens becomes max_tokens, as the gateway's other
//     dialects send it.
//
// # Continuing a response
//
// ReadTurn reads a request without its history; Turn.Chat makes the
// neutral request of the instructions (a system message, first), the kept
// History, then the input; Turn.Next is the History to keep after the
// turn: the one it continued, its input, and the Answer. The instructions
// are never kept: in OpenAI's API they do not carry over to the next
// response, each request says its own. Input items of the system and
// developer roles are input, and kept, as OpenAI keeps them. The input is
// translated on its own, so a function_call at its start is a turn of its
// own, never merged into the kept conversation's last message.
//
// The Answer is the response's output items read back by the same
// translation as replayed input items (a message's output_text and
// refusal parts become its text, function_calls the tool_calls of the
// assistant message before them), so continuing a response by its id and
// replaying its output as input are one conversation, and what is kept is
// exactly what the client received (after the gateway's redaction).
// ResponseWith and NewStreamWith call Meta.Keep with it when the response
// is final (completed or incomplete), before the client receives it: the
// JSON body, or a stream's response.completed (or response.incomplete),
// so a client continuing at once finds it kept. A refused answer or a
// failed stream is not kept.
//
// DecodeHistory reads a kept History with the strict reading of a
// request (the state backend is outside the process): unknown members,
// duplicates, invalid UTF-8 and roles the translation does not write are
// refused.
//
// # Translating the answer
//
//   - The response id is "resp_" and Meta.Suffix: the gateway gives every
//     response a random suffix of its own, so that no two kept responses
//     share an id whatever the provider's ids are. Without one (the zero
//     Meta), the suffix is the completion's id without its "chatcmpl-"
//     prefix (a completion without an id gets a digest of its JSON, of
//     the first chunk in a stream, so the id is stable). The message
//     item's id is "msg_" and the same suffix (and "_" and its output
//     index for text after a tool call in a stream), a function_call
//     item's "fc_", the suffix, "_" and its output index. Tool call ids
//     pass as call_id as they are, so a later function_call_output names
//     the call the upstream knows.
//   - The output: a message item with an output_text part for the text and
//     a refusal part for OpenAI's refusal, when there is either, then a
//     function_call item per tool call.
//   - status: stop, tool_calls and function_call → completed; length →
//     incomplete with incomplete_details {reason: max_output_tokens};
//     content_filter → incomplete with {reason: content_filter}. The last
//     item of an incomplete answer has status incomplete, the others
//     completed. A missing or unknown finish_reason is an error: the
//     answer may be incomplete.
//   - usage: input_tokens is prompt_tokens, cached_tokens its
//     prompt_tokens_details.cached_tokens, output_tokens completion_tokens,
//     reasoning_tokens its completion_tokens_details.reasoning_tokens (0
//     when not given), total_tokens their sum; the two APIs count alike. No
//     usage in the completion is usage null.
//   - The members of the Response object that echo the request
//     (temperature, top_p, tool_choice, tools, parallel_tool_calls, text,
//     truncation, instructions, max_output_tokens, reasoning, metadata,
//     user) are the API's defaults (1, 1, auto, [], true, {format: text},
//     disabled, null, null, null effort and summary, {}, null), not the
//     request's: Response and Stream see the answer only. The SDKs require
//     the members; clients read what they sent from their own request.
//     previous_response_id is Meta's (null for none). store says whether
//     the response was kept (Keep's answer; in a stream's
//     response.created and response.in_progress, Meta.Store, what the
//     request asked); false without Keep. background is false: nothing is
//     polled.
//   - Fields of the answer with no Responses equivalent (logprobs,
//     reasoning_content, annotations, system_fingerprint) are not carried.
//
// Errors keep OpenAI's shape (see Error); in a stream, see Stream.
package responses
