// Package sacp implements the building blocks of the Standard Agent
// Communication Protocol (SACP, the agent answer protocol of docs/glossary.md):
// the protocol template that is injected into chat-completions requests, the
// sanitizer that digs the JSON object out of a model's answer, the validator
// for the response envelope and an agent's data schema, and the fallback
// object used when an answer cannot be repaired.
//
// The package is pure: it does no I/O except LoadTemplate, keeps no global
// mutable state and imports nothing of the gateway but its JSON lexical
// rules (internal/jsonlex), so the proxy, the approval API and the
// inter-agent relay can all reuse it. The proxy owns
// HTTP, streaming and the re-ask loop; on the way of a json_standard answer
// (inject, call the model, validate, re-ask, fall back, answer: README,
// "Behaviour") it calls
//
//  1. Inject on the request body, before the model is called,
//  2. Validator.Check on the final assistant content,
//  3. ReaskPrompt with Outcome.Errors when a re-ask is allowed,
//  4. Fallback with the raw content when attempts are exhausted,
//  5. Response.Compact for the content the client receives.
package sacp
