// Package neutral holds what the dialect packages share about the neutral
// form, OpenAI Chat Completions: the chat request they write, the parts of
// a chat completion and of its stream chunks they read, the reader of the
// upstream SSE chunk stream, the strict decoding of a client's body with
// its field-named errors, and the request helpers both dialects use (the
// string-or-array reading, the member, sampling and name checks, and how a
// translated value is written).
//
// It is internal to dialect: each dialect keeps what is its own API's.
package neutral
