package responses

import (
	"errors"
	"slices"
	"strconv"

	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// Continuing a response (previous_response_id): the gateway keeps, per
// response it answered, the conversation so far in the neutral form (a
// History), and a request that continues it is the instructions, that
// conversation, then the request's input (Turn.Chat). This file is the
// translation's part of it; where a History is kept, and for whom, is the
// caller's.

// History is a kept conversation: the neutral form's messages of the turns
// so far, without their instructions.
type History struct {
	messages []neutral.ChatMessage
}

// historyJSON is a History as it is kept: one object, so that a later
// member can be added without guessing at a bare array.
type historyJSON struct {
	Messages []neutral.ChatMessage `json:"messages"`
}

// historyRoles are the roles a kept message may have: those the
// translation writes.
var historyRoles = []string{"system", "developer", "user", "assistant", "tool"}

// DecodeHistory reads a History as Next encoded it, with the same strict
// reading as a client's request (the state backend is outside the
// process: what comes back is checked, not trusted). An error means the
// kept value is not a conversation.
func DecodeHistory(b []byte) (*History, error) {
	h, err := neutral.Decode[historyJSON](b, nil)
	if err != nil {
		return nil, err
	}
	if len(h.Messages) == 0 {
		return nil, errors.New("a kept conversation without messages")
	}
	for i, m := range h.Messages {
		if !slices.Contains(historyRoles, m.Role) {
			return nil, errorf("messages."+strconv.Itoa(i)+".role", "not a role the translation writes: %q", m.Role)
		}
		if len(m.Content) == 0 {
			return nil, errorf("messages."+strconv.Itoa(i)+".content", "field required")
		}
	}
	return &History{messages: h.Messages}, nil
}

// Len is the number of messages.
func (h *History) Len() int { return len(h.messages) }

// Next is the conversation after the turn, encoded to be kept: the
// conversation it continued (prev, nil for none), its input, and the
// answer as the client received it. The instructions are left out: in
// OpenAI's API they do not carry over to the next response (the next
// request says its own). Input items of the system or developer role are
// input, and are kept, as OpenAI keeps them.
func (t *Turn) Next(prev *History, a *Answer) []byte {
	var h historyJSON
	if prev != nil {
		h.Messages = append(h.Messages, prev.messages...)
	}
	h.Messages = append(h.Messages, t.input...)
	if a != nil {
		h.Messages = append(h.Messages, a.messages...)
	}
	return neutral.MustJSON(h)
}

// Answer is a response's output as the neutral form's messages: what a
// client replaying the output items as input would send (the same
// translation reads them), so that continuing a response by its id and
// replaying its output are one conversation. It is built from the output
// the client received, after the gateway's redaction.
type Answer struct {
	// ID is the response's id.
	ID string
	// Status is the response's status: completed or incomplete.
	Status   string
	messages []neutral.ChatMessage
}

// answerOf translates the output items of a response (the values Response
// and Stream write) into the messages of an Answer.
func answerOf(id, status string, output []any) (*Answer, error) {
	a := &Answer{ID: id, Status: status}
	for i, o := range output {
		var it item
		switch v := o.(type) {
		case messageItem:
			var parts []part
			for _, p := range v.Content {
				switch p := p.(type) {
				case outputText:
					parts = append(parts, part{Type: "output_text", Text: &p.Text})
				case refusalPart:
					parts = append(parts, part{Type: "refusal", Refusal: &p.Refusal})
				default:
					return nil, errors.New("an output message part the translation does not write")
				}
			}
			if len(parts) == 0 {
				continue // an empty message says nothing to the next turn
			}
			typ, role := "message", v.Role
			it = item{Type: &typ, Role: &role, Content: &content{parts: parts}}
		case functionCallItem:
			typ := "function_call"
			it = item{Type: &typ, CallID: &v.CallID, Name: &v.Name, Arguments: &v.Arguments}
		default:
			return nil, errors.New("an output item the translation does not write")
		}
		var err error
		if a.messages, err = it.translate("output."+strconv.Itoa(i), a.messages, 0); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Meta is what a response says beyond the answer: its id, the response it
// continues and whether it is kept. The zero Meta is a response of its
// own, not kept, its id derived from the answer.
type Meta struct {
	// Suffix names the response, "resp_" and Suffix, and its items ("msg_"
	// and Suffix, ...). Empty: derived from the completion's id (see the
	// package documentation). The gateway gives each response a suffix of
	// its own, so that no two kept responses share an id whatever the
	// provider's ids are.
	Suffix string
	// PreviousResponseID is the response this one continues ("" for none).
	PreviousResponseID string
	// Store is what the response's store member says until Keep answers
	// (a stream's response.created and response.in_progress).
	Store bool
	// Keep, when set, is called once with the answer when the response is
	// final (completed or incomplete), before the client receives it (the
	// JSON body, or a stream's last event), so that a client continuing
	// it at once finds it kept. It returns whether it was kept, which the
	// final response's store member says. It is not called for an answer
	// the translation refused or a stream that failed.
	Keep func(*Answer) bool
}

// previous is the response's previous_response_id member.
func (m *Meta) previous() *string {
	if m.PreviousResponseID == "" {
		return nil
	}
	return &m.PreviousResponseID
}
