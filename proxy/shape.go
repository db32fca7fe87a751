package proxy

import (
	sj "github.com/sacpgw/gateway/internal/strictjson"
)

// The known shapes of what crosses the gateway, for the strict reading: at
// these positions a member name that differs from a known one only by case
// is refused (an upstream reading case-insensitively would take it for the
// known one, while the gateway checked the other). Unknown members are
// allowed (providers add fields), and every string in them is scanned.
var (
	functionCall = sj.Object(map[string]*sj.Fields{"name": nil, "arguments": nil})
	toolCall     = sj.Object(map[string]*sj.Fields{"id": nil, "type": nil, "index": nil, "function": functionCall})
	contentPart  = sj.Object(map[string]*sj.Fields{
		"type": nil, "text": nil, "refusal": nil,
		"image_url":   sj.Object(map[string]*sj.Fields{"url": nil, "detail": nil}),
		"input_audio": sj.Object(map[string]*sj.Fields{"data": nil, "format": nil}),
		"file":        sj.Object(map[string]*sj.Fields{"file_id": nil, "filename": nil, "file_data": nil}),
	})
	content     = sj.Either(nil, sj.Array(contentPart))
	chatMessage = sj.Object(map[string]*sj.Fields{
		"role": nil, "content": content, "name": nil, "tool_calls": sj.Array(toolCall), "tool_call_id": nil,
		"function_call": functionCall, "refusal": nil, "audio": nil, "reasoning_content": nil, "reasoning": nil,
	})
	tool = sj.Object(map[string]*sj.Fields{"type": nil, "function": sj.Object(map[string]*sj.Fields{
		"name": nil, "description": nil, "parameters": nil, "strict": nil,
	})})

	// requestFields is a chat completions or embeddings request.
	requestFields = sj.Object(map[string]*sj.Fields{
		"model": nil, "messages": sj.Array(chatMessage), "stream": nil,
		"stream_options": sj.Object(map[string]*sj.Fields{"include_usage": nil}),
		"max_tokens":     nil, "max_completion_tokens": nil, "temperature": nil, "top_p": nil, "n": nil, "stop": nil,
		"tools": sj.Array(tool), "tool_choice": nil, "parallel_tool_calls": nil, "functions": nil, "function_call": nil,
		"response_format": sj.Object(map[string]*sj.Fields{"type": nil, "json_schema": sj.Object(map[string]*sj.Fields{
			"name": nil, "description": nil, "schema": nil, "strict": nil,
		})}),
		"user": nil, "seed": nil, "logprobs": nil, "top_logprobs": nil, "presence_penalty": nil, "frequency_penalty": nil,
		"logit_bias": nil, "metadata": nil, "store": nil, "modalities": nil, "audio": nil, "prediction": nil,
		"reasoning_effort": nil, "service_tier": nil, "web_search_options": nil,
		"input": nil, "encoding_format": nil, "dimensions": nil,
	})

	usageFields = sj.Object(map[string]*sj.Fields{"prompt_tokens": nil, "completion_tokens": nil, "total_tokens": nil,
		"prompt_tokens_details": nil, "completion_tokens_details": nil})
	answerMessage = sj.Object(map[string]*sj.Fields{
		"role": nil, "content": content, "tool_calls": sj.Array(toolCall), "function_call": functionCall,
		"refusal": nil, "reasoning_content": nil, "reasoning": nil, "annotations": nil, "audio": nil,
	})
	choice = sj.Object(map[string]*sj.Fields{"index": nil, "message": answerMessage, "delta": answerMessage,
		"finish_reason": nil, "logprobs": nil})

	// answerFields is a chat completion, a stream chunk, an embeddings
	// answer or a provider's error.
	answerFields = sj.Object(map[string]*sj.Fields{
		"id": nil, "object": nil, "created": nil, "model": nil, "choices": sj.Array(choice), "usage": usageFields,
		"system_fingerprint": nil, "service_tier": nil, "data": nil,
		"error": sj.Object(map[string]*sj.Fields{"message": nil, "type": nil, "code": nil, "param": nil}),
	})
)

// identifierLike reports whether s looks like a protocol token (an id, a
// role, a model name): no spaces, no '@', short. Only such values are left
// unscanned at the structural positions; anything else there is scanned
// like every other string, so a structural field cannot carry an e-mail
// or a sentence past the detectors.
func identifierLike(s string) bool {
	if len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':' || c == '/') {
			return false
		}
	}
	return true
}

// structuralAnswer reports whether the string at p in an answer is one of
// the documented structural fields that redaction leaves alone: the
// answer's id, object, model and system_fingerprint, a choice's
// finish_reason, a message's role, any type, a tool call's id and
// function name, and an embedding given as base64.
func structuralAnswer(p sj.Path, s string) bool {
	if len(p) == 3 && p.Key(0) == "embedding" && p.Key(2) == "data" {
		// A base64 vector (encoding_format: base64): the provider's
		// numbers, not text, and high-entropy enough to look like a key.
		return true
	}
	if !identifierLike(s) {
		return false
	}
	key := p.Key(0)
	switch len(p) {
	case 1:
		switch key {
		case "id", "object", "model", "system_fingerprint", "service_tier":
			return true
		}
	case 3:
		return key == "finish_reason" && p.Key(2) == "choices"
	}
	switch key {
	case "type":
		return true
	case "role":
		return len(p) == 4 && p.Key(3) == "choices"
	case "id":
		return p.Key(2) == "tool_calls"
	case "name":
		return p.Key(1) == "function" && p.Key(3) == "tool_calls" || p.Key(1) == "function_call"
	}
	return false
}

// structuralRequest is the request side's allow-list, shorter on purpose:
// the model (routed and allow-listed), a message's role and any type.
// Tool call ids and function names in a request are the agent's text and
// are scanned.
func structuralRequest(p sj.Path, s string) bool {
	if !identifierLike(s) {
		return false
	}
	switch p.Key(0) {
	case "model":
		return len(p) == 1
	case "role":
		return len(p) == 3 && p.Key(2) == "messages"
	case "type":
		return true
	}
	return false
}

// isArguments reports whether the string at p is a tool call's arguments
// (a JSON document in a string, scanned inside when it parses).
func isArguments(p sj.Path) bool {
	return p.Key(0) == "arguments" && (p.Key(1) == "function" || p.Key(1) == "function_call")
}
