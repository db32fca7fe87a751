// Package compact implements compact SACP (SACP v0.1), the terse plan
// language agents use with each other (docs/glossary.md): the verb/tool
// library, the message validator, SPAWN_AGENT requests and the agent prompt.
// The gateway uses it for POST /sacp/validate, POST /registry/spawn and agents
// with response_format sacp_compact (docs/agent-messaging.md).
//
// A message is an object with the goal ("g", or its long name "goal", never
// both), "plan" (steps [verb, tool, params] and {"parallel": [...]} groups)
// and the optional "ctx", "msg_id", "reply_to", "state", "out_fmt",
// "proto_ver", "test_mode" and "subtask". A plan may name a verb by one of
// its aliases (compact SACP's own examples write "s" for search); every
// check then uses the verb itself (the tool's supported verbs, typed inputs),
// and what the package reports about a plan (Library.PlanVerbs, Resolve,
// Spawn.Verb) gives the verb's name, the spelling supported_verbs lists use.
//
// Messages are untrusted, and a message the validator accepts is then read by
// other programs, so the validator is deliberately stricter than
// encoding/json: the validator and every reader must agree on what a message
// says. It therefore rejects, as MALFORMED_MESSAGE, documents that some JSON
// readers accept but read differently:
//
//   - duplicate object keys at any depth (one reader keeps the first value,
//     another the last: a classic smuggling vector);
//   - strings that are not valid UTF-8, or that hold an unpaired UTF-16
//     surrogate escape such as "\ud800" (RFC 7493, I-JSON);
//   - nesting deeper than 64 levels.
//
// Everything the validator accepts is valid JSON for encoding/json. Its tokens
// (strings, numbers, literals, whitespace) are read by internal/jsonlex, the
// lexical rules all of the gateway's JSON readers share, so the validator
// cannot read a string or number differently from them. Parsing is linear,
// with no backtracking, so a hostile message costs time proportional to its
// size.
//
// The package imports only the standard library and internal/jsonlex, and
// keeps no mutable state: a *Library is immutable after NewLibrary or Extend
// and safe for concurrent use.
package compact
