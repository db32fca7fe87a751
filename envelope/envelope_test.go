package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// roundTrip checks Decode(Marshal(m)) == m and that Marshal is stable.
func roundTrip(t testing.TB, m *Message) []byte {
	t.Helper()
	out, err := m.Marshal()
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	back, err := Decode(out)
	if err != nil {
		t.Fatalf("Decode(Marshal(m)) = %v\n%s", err, out)
	}
	if !reflect.DeepEqual(back, m) {
		t.Fatalf("round trip differs\n got: %#v\nwant: %#v\njson: %s", back, m, out)
	}
	again, err := back.Marshal()
	if err != nil || string(again) != string(out) {
		t.Fatalf("second Marshal = %s, %v; want %s", again, err, out)
	}
	return out
}

func TestFixtures(t *testing.T) {
	ts := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UTC()
	}
	tests := []struct {
		file string
		want *Message // compared whole, except Payload and Metadata when nil here
	}{
		{"acl/request.json", &Message{Format: ACL, Type: Request, Priority: Medium,
			Sender: Party{"orchestrator_1", "orchestrator"}, Recipient: &Party{"planner_1", "planner"},
			WorkflowID: "wf_12345", Action: "plan_workflow"}},
		{"acl/response.json", &Message{Format: ACL, Type: Response, Priority: Medium,
			Sender: Party{"planner_1", "planner"}, Recipient: &Party{"orchestrator_1", "orchestrator"},
			WorkflowID: "wf_12345", Action: "plan_complete", InReplyTo: "msg_original_request", Status: "success"}},
		{"acl/notification.json", &Message{Format: ACL, Type: Event, Priority: Medium,
			Sender: Party{"executor_1", "executor"}, WorkflowID: "wf_12345", Action: "task_completed",
			Payload: json.RawMessage(`{"task_id":"task_2","result":"Database updated successfully","affected_records":1}`)}},
		{"acl/error.json", &Message{Format: ACL, Type: Error, Priority: Medium,
			Sender: Party{"executor_1", "executor"}, Recipient: &Party{ID: "orchestrator_1"},
			WorkflowID: "wf_12345", Action: "execution_failed",
			Error:   &ErrorInfo{Code: "NOT_FOUND", Message: "Customer CUST999 not found"},
			Payload: json.RawMessage(`{"error_code":"NOT_FOUND","customer_id":"CUST999"}`)}},
		{"acl/ack.json", &Message{Format: ACL, Type: Ack, Priority: Medium,
			Sender: Party{ID: "executor_1"}, Recipient: &Party{ID: "orchestrator_1"},
			InReplyTo: "msg_12345", Status: "received"}},
		{"acl/flow1_request.json", &Message{Format: ACL, ID: "msg_001", Type: Request, Priority: High,
			Sender: Party{"orch_1", "orchestrator"}, Recipient: &Party{"planner_1", "planner"},
			WorkflowID: "wf_abc", Action: "plan_workflow",
			Payload: json.RawMessage(`{"operation":"update","target_customer_id":"CUST001","parameters":{"credit_limit":100000}}`)}},
		{"acl/flow2_response.json", &Message{Format: ACL, ID: "msg_002", Type: Response, Priority: Medium,
			Sender: Party{ID: "planner_1"}, Recipient: &Party{ID: "orch_1"},
			WorkflowID: "wf_abc", Action: "plan_complete", InReplyTo: "msg_001", Status: "success"}},
		{"acl/flow3_request.json", &Message{Format: ACL, ID: "msg_003", Type: Request, Priority: Medium,
			Sender: Party{ID: "orch_1"}, Recipient: &Party{"executor_1", "executor"},
			WorkflowID: "wf_abc", TaskID: "t2", Action: "execute_operation"}},
		{"acl/flow4_response.json", &Message{Format: ACL, ID: "msg_004", Type: Response, Priority: Medium,
			Sender: Party{ID: "executor_1"}, Recipient: &Party{ID: "orch_1"},
			WorkflowID: "wf_abc", TaskID: "t2", Action: "execution_complete", InReplyTo: "msg_003", Status: "success"}},
		{"sam/request.json", &Message{Format: SAM, ID: "msg-uuid-1234", CorrelationID: "corr-uuid-5678",
			Type: Request, Timestamp: ts("2025-11-23T10:00:00Z"), Priority: High, TimeoutMS: 5000,
			Sender: Party{"vendor_onboarding_agent", "initiator"}, Recipient: &Party{"compliance_agent", "validator"},
			Action:   "validate_vendor",
			Metadata: json.RawMessage(`{"priority":"high","timeout_ms":5000}`)}},
		{"sam/error.json", &Message{Format: SAM, ID: "msg-uuid-1235", CorrelationID: "corr-uuid-5678",
			Type: Error, Timestamp: ts("2025-11-23T09:00:02.25Z"), Priority: Medium,
			Sender: Party{"compliance_agent", "validator"}, Recipient: &Party{"orchestrator", "orchestrator"},
			Error: &ErrorInfo{Code: "VALIDATION_FAILED", Message: "Tax ID format is invalid",
				Source: "compliance_agent", Severity: "CRITICAL", Retryable: ptr(false)}}},
		{"sam/event.json", &Message{Format: SAM, ID: "msg-uuid-1236", CorrelationID: "corr-uuid-5678",
			Type: Event, Timestamp: ts("2025-11-23T10:00:05Z"), Priority: Low,
			Sender: Party{"compliance_agent", "validator"}, Action: "vendor_validated",
			Payload:  json.RawMessage(`{"action":"vendor_validated","data":{"vendor_id":"v-123","status":"validated"}}`),
			Metadata: json.RawMessage(`{"priority":"low"}`)}},
		{"sam/response.json", &Message{Format: SAM, ID: "msg-uuid-1237", CorrelationID: "corr-uuid-5678",
			Type: Response, Timestamp: ts("2025-11-23T10:00:06Z"), Priority: Medium,
			Sender: Party{"compliance_agent", "validator"}, Recipient: &Party{"vendor_onboarding_agent", "initiator"},
			Action: "validation_result", InReplyTo: "msg-uuid-1234",
			Metadata: json.RawMessage(`{"in_reply_to":"msg-uuid-1234"}`)}},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		seen[tc.file] = true
		t.Run(tc.file, func(t *testing.T) {
			raw := readFixture(t, tc.file)
			m, err := Decode(raw)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			byFormat := DecodeACL
			if tc.want.Format == SAM {
				byFormat = DecodeSAM
			}
			if m2, err := byFormat(raw); err != nil || !reflect.DeepEqual(m2, m) {
				t.Fatalf("Decode%s = %+v, %v; want %+v", strings.ToUpper(string(tc.want.Format)), m2, err, m)
			}
			got := *m
			if tc.want.Payload == nil {
				got.Payload = nil
			}
			if tc.want.Metadata == nil {
				got.Metadata = nil
			}
			if !reflect.DeepEqual(&got, tc.want) {
				t.Errorf("Decode:\n got %+v\nwant %+v", got, *tc.want)
			}
			roundTrip(t, m)
		})
	}
	// Every fixture is in the table, so none escapes the exact checks.
	files, _ := filepath.Glob("testdata/*/*.json")
	for _, f := range files {
		rel, _ := filepath.Rel("testdata", f)
		if !seen[filepath.ToSlash(rel)] {
			t.Errorf("fixture %s is not in the table", rel)
		}
	}
}

// aclReq and samReq are valid envelopes that the invalid cases below break
// one field at a time.
const aclReq = `{"message_id":"msg_001","message_type":"request","sender_id":"orch_1","receiver_id":"planner_1",` +
	`"workflow_id":"wf_abc","action":"plan_workflow","payload":{"operation":"update"}%s}`

const samReq = `{"message_id":"m-1","correlation_id":"c-1","sender":{"agent_id":"a1","role":"initiator"},` +
	`"recipient":{"agent_id":"a2"},"message_type":"REQUEST","payload":{"action":"validate_vendor"}%s}`

func acl(extra string) string { return strings.Replace(aclReq, "%s", extra, 1) }
func sam(extra string) string { return strings.Replace(samReq, "%s", extra, 1) }

func TestInvalid(t *testing.T) {
	long := strings.Repeat("a", 129)
	deep := func(n int) string { // ACL notification whose payload.x holds n nested arrays
		return `{"message_type":"notification","sender_id":"s","action":"a","payload":{"x":` +
			strings.Repeat("[", n) + strings.Repeat("]", n) + `}}`
	}
	tests := []struct {
		name, in, field string
	}{
		// JSON-level smuggling and framing.
		{"empty", ``, ""},
		{"not an object", `["sender_id"]`, ""},
		{"string", `"x"`, ""},
		{"trailing garbage", acl("") + `x`, ""},
		{"two objects", acl("") + acl(""), ""},
		{"syntax error", `{"message_type":"request",}`, ""},
		{"duplicate key", acl(`,"action":"other"`), "action"},
		{"duplicate key escaped", acl(`,"\u0061ction":"other"`), "action"},
		{"duplicate nested", acl(`,"metadata":{"a":{"b":1,"b":2}}`), "metadata.a.b"},
		{"duplicate in array", `{"message_type":"notification","sender_id":"s","action":"a","payload":{"l":[{},{"k":1,"k":1}]}}`, "payload.l[1].k"},
		{"depth 65", deep(63), "..." + strings.Repeat("[0]", 21)},
		{"invalid utf-8", acl(`,"status":"ok` + "\xff" + `"`), "status"},
		{"lone surrogate", acl(`,"status":"\ud800"`), "status"},
		{"control char", acl(`,"status":"a` + "\x01" + `"`), "status"},
		{"bad number", acl(`,"metadata":{"n":01}`), "metadata.n"},
		{"bad escape", acl(`,"status":"a\x"`), "status"},
		{"bad unicode escape", acl(`,"status":"\u12G4"`), "status"},
		{"high surrogate then text", acl(`,"status":"\ud83dx"`), "status"},
		{"high surrogate then high", acl(`,"status":"\ud83d\ud83d"`), "status"},
		{"lone low surrogate", acl(`,"status":"\ude00"`), "status"},
		{"unterminated string", `{"sender_id":"abc`, "sender_id"},
		{"missing colon", `{"sender_id" "abc"}`, "sender_id"},
		{"bare key", `{sender_id:"abc"}`, ""},
		{"number dot", acl(`,"metadata":{"n":1.}`), "metadata.n"},
		{"number exponent", acl(`,"metadata":{"n":1e}`), "metadata.n"},
		{"number minus", acl(`,"metadata":{"n":-}`), "metadata.n"},
		{"array no comma", acl(`,"metadata":{"n":[1 2]}`), "metadata.n[0]"},
		{"unclosed string", acl("")[:40], "message_type"},
		{"unclosed object", acl("")[:len(acl(""))-1], ""},
		{"bad literal", acl(`,"metadata":{"n":nul}`), "metadata.n"},
		// Format detection and strict keys.
		{"both senders", acl(`,"sender":{"agent_id":"x"}`), "sender_id"},
		{"neither sender", `{"message_type":"request"}`, "sender"},
		{"unknown key acl", acl(`,"foo":1`), "foo"},
		{"unknown key case", acl(`,"Message_Type":"request"`), "Message_Type"},
		{"unknown key quoted", acl(`,"a b":1`), `["a b"]`},
		{"sam key in acl", acl(`,"correlation_id":"c"`), "correlation_id"},
		{"acl key in sam", sam(`,"workflow_id":"w"`), "workflow_id"},
		{"unknown sender key", strings.Replace(sam(""), `"role":"initiator"`, `"name":"x"`, 1), "sender.name"},
		{"unknown error key", sam(`,"error":{"code":"C","message":"m","stack":"x"}`), "error.stack"},
		// Ids.
		{"bad id chars", strings.Replace(acl(""), `"msg_001"`, `"msg 001"`, 1), "message_id"},
		{"id slash", strings.Replace(acl(""), `"wf_abc"`, `"wf/abc"`, 1), "workflow_id"},
		{"129-byte id", strings.Replace(acl(""), `"orch_1"`, `"`+long+`"`, 1), "sender_id"},
		{"empty id", acl(`,"task_id":""`), "task_id"},
		{"id not string", strings.Replace(acl(""), `"planner_1"`, `7`, 1), "receiver_id"},
		{"sam agent id", strings.Replace(sam(""), `"a2"`, `"a2!"`, 1), "recipient.agent_id"},
		{"sam correlation id", strings.Replace(sam(""), `"c-1"`, `"c 1"`, 1), "correlation_id"},
		{"sam sender null", strings.Replace(sam(""), `{"agent_id":"a1","role":"initiator"}`, `null`, 1), "sender"},
		{"sam sender no id", strings.Replace(sam(""), `"agent_id":"a1",`, ``, 1), "sender.agent_id"},
		{"sam recipient empty", strings.Replace(sam(""), `{"agent_id":"a2"}`, `{}`, 1), "recipient.agent_id"},
		{"sam recipient string", strings.Replace(sam(""), `{"agent_id":"a2"}`, `"a2"`, 1), "recipient"},
		{"sender_type too long", acl(`,"sender_type":"` + strings.Repeat("x", 65) + `"`), "sender_type"},
		// Group sends: a type instead of a receiver, for what may be broadcast.
		{"empty receiver_type without id", `{"message_type":"notification","sender_id":"s","action":"a","receiver_type":""}`, "receiver_type"},
		{"group request acl", `{"message_type":"request","sender_id":"s","action":"a","receiver_id":null,"receiver_type":"executor"}`, "receiver_id"},
		{"group response sam", `{"sender":{"agent_id":"s"},"recipient":{"agent_id":null,"role":"executor"},"message_type":"RESPONSE"}`, "recipient"},
		{"sam recipient null id no role", strings.Replace(sam(""), `{"agent_id":"a2"}`, `{"agent_id":null}`, 1), "recipient.agent_id"},
		{"sam recipient empty role", strings.Replace(sam(""), `{"agent_id":"a2"}`, `{"role":""}`, 1), "recipient.agent_id"},
		{"group type too long", `{"message_type":"notification","sender_id":"s","action":"a","receiver_type":"` + strings.Repeat("x", 65) + `"}`, "receiver_type"},
		{"sam sender type only", strings.Replace(sam(""), `"agent_id":"a1",`, `"agent_id":null,`, 1), "sender.agent_id"},
		// Types.
		{"missing type", strings.Replace(acl(""), `"message_type":"request",`, ``, 1), "message_type"},
		{"unknown type acl", strings.Replace(acl(""), `"request"`, `"event"`, 1), "message_type"},
		{"unknown type sam", strings.Replace(sam(""), `"REQUEST"`, `"NOTIFICATION"`, 1), "message_type"},
		{"type kelvin sign", strings.Replace(sam(""), `"REQUEST"`, `"AC\u212a"`, 1), "message_type"},
		{"sam error severity dotless i", sam(`,"error":{"code":"C","message":"m","severity":"\u0131nfo"}`), "error.severity"},
		{"type not string", strings.Replace(acl(""), `"request"`, `1`, 1), "message_type"},
		// Timestamp and priority.
		{"timestamp without zone", acl(`,"timestamp":"2025-11-23T10:00:00"`), "timestamp"},
		{"timestamp date only", acl(`,"timestamp":"2025-11-23"`), "timestamp"},
		{"timestamp year -1 in UTC", acl(`,"timestamp":"0000-01-01T00:00:00+01:00"`), "timestamp"},
		{"timestamp year 10000 in UTC", acl(`,"timestamp":"9999-12-31T23:59:59-01:00"`), "timestamp"},
		{"timestamp number", acl(`,"timestamp":1732356000`), "timestamp"},
		{"bad priority", acl(`,"priority":"urgent"`), "priority"},
		{"uppercase priority", acl(`,"priority":"HIGH"`), "priority"},
		{"sam bad priority", sam(`,"metadata":{"priority":"urgent"}`), "metadata.priority"},
		{"sam null priority", sam(`,"metadata":{"priority":null}`), "metadata.priority"},
		// Metadata.
		{"timeout 0", acl(`,"metadata":{"timeout_ms":0}`), "metadata.timeout_ms"},
		{"timeout 3600001", sam(`,"metadata":{"timeout_ms":3600001}`), "metadata.timeout_ms"},
		{"timeout 1.5", sam(`,"metadata":{"timeout_ms":1.5}`), "metadata.timeout_ms"},
		{"timeout string", sam(`,"metadata":{"timeout_ms":"5"}`), "metadata.timeout_ms"},
		{"timeout exponent", acl(`,"metadata":{"timeout_ms":5e3}`), "metadata.timeout_ms"},
		{"timeout negative", acl(`,"metadata":{"timeout_ms":-1}`), "metadata.timeout_ms"},
		{"timeout huge", acl(`,"metadata":{"timeout_ms":99999999999999999999}`), "metadata.timeout_ms"},
		{"metadata array", acl(`,"metadata":[]`), "metadata"},
		{"sam in_reply_to bad", sam(`,"metadata":{"in_reply_to":"a b"}`), "metadata.in_reply_to"},
		// Payload and action.
		{"payload array", strings.Replace(acl(""), `{"operation":"update"}`, `[]`, 1), "payload"},
		{"sam payload null", strings.Replace(sam(""), `{"action":"validate_vendor"}`, `null`, 1), "payload"},
		{"acl missing action", strings.Replace(acl(""), `"action":"plan_workflow",`, ``, 1), "action"},
		{"acl action space", strings.Replace(acl(""), `"plan_workflow"`, `"plan workflow"`, 1), "action"},
		{"acl action too long", strings.Replace(acl(""), `"plan_workflow"`, `"`+long+`"`, 1), "action"},
		{"sam request no payload", strings.Replace(sam(""), `,"payload":{"action":"validate_vendor"}`, ``, 1), "payload.action"},
		{"sam request no action", strings.Replace(sam(""), `"action":"validate_vendor"`, `"data":{}`, 1), "payload.action"},
		{"sam action not string", strings.Replace(sam(""), `"validate_vendor"`, `5`, 1), "payload.action"},
		{"sam action empty", strings.Replace(sam(""), `"validate_vendor"`, `""`, 1), "payload.action"},
		// Required per type.
		{"acl request null recipient", strings.Replace(acl(""), `"planner_1"`, `null`, 1), "receiver_id"},
		{"acl request no recipient", strings.Replace(acl(""), `"receiver_id":"planner_1",`, ``, 1), "receiver_id"},
		{"sam request null recipient", strings.Replace(sam(""), `{"agent_id":"a2"}`, `null`, 1), "recipient"},
		{"acl response no in_reply_to", strings.Replace(acl(""), `"request"`, `"response"`, 1), "in_reply_to"},
		{"sam response no recipient", strings.Replace(strings.Replace(sam(""), `"REQUEST"`, `"RESPONSE"`, 1), `{"agent_id":"a2"}`, `null`, 1), "recipient"},
		{"acl ack no in_reply_to", `{"message_type":"ack","sender_id":"e1","receiver_id":"o1"}`, "in_reply_to"},
		{"acl error no error", strings.Replace(acl(""), `"request"`, `"error"`, 1), "error"},
		{"acl error empty", strings.Replace(acl(`,"error":""`), `"request"`, `"error"`, 1), "error"},
		{"acl error not string", strings.Replace(acl(`,"error":{"code":"X"}`), `"request"`, `"error"`, 1), "error"},
		{"acl error_code too long", strings.Replace(acl(`,"error":"boom"`), `"operation":"update"`, `"error_code":"`+long+`"`, 1), "payload.error_code"},
		{"sam error missing", strings.Replace(sam(""), `"REQUEST"`, `"ERROR"`, 1), "error"},
		{"sam error no code", strings.Replace(sam(`,"error":{"message":"m"}`), `"REQUEST"`, `"ERROR"`, 1), "error.code"},
		{"sam error empty code", strings.Replace(sam(`,"error":{"code":"","message":"m"}`), `"REQUEST"`, `"ERROR"`, 1), "error.code"},
		{"sam error no message", strings.Replace(sam(`,"error":{"code":"C"}`), `"REQUEST"`, `"ERROR"`, 1), "error.message"},
		{"sam error bad severity", sam(`,"error":{"code":"C","message":"m","severity":"PANIC"}`), "error.severity"},
		{"sam error empty severity", sam(`,"error":{"code":"C","message":"m","severity":""}`), "error.severity"},
		{"sam error retryable string", sam(`,"error":{"code":"C","message":"m","retryable":"no"}`), "error.retryable"},
		{"sam error array", sam(`,"error":[]`), "error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode([]byte(tc.in))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Decode = %+v, %v; want *FieldError for %q", m, err, tc.field)
			}
			if fe.Field != tc.field {
				t.Errorf("Field = %q (%v); want %q", fe.Field, err, tc.field)
			}
			if fe.Reason == "" {
				t.Error("empty Reason")
			}
		})
	}
}

// TestValidEdges pins what is deliberately accepted.
func TestValidEdges(t *testing.T) {
	deep64 := `{"message_type":"notification","sender_id":"s","action":"a","payload":{"x":` +
		strings.Repeat("[", 62) + strings.Repeat("]", 62) + `}}`
	tests := []struct {
		name  string
		in    string
		check func(*Message) bool
	}{
		{"depth 64", deep64, func(m *Message) bool { return m.Type == Event }},
		{"uppercase acl type", strings.Replace(acl(""), `"request"`, `"REQUEST"`, 1), func(m *Message) bool { return m.Type == Request }},
		{"lowercase sam type", strings.Replace(sam(""), `"REQUEST"`, `"request"`, 1), func(m *Message) bool { return m.Type == Request }},
		{"sam ack", strings.Replace(sam(""), `"REQUEST"`, `"ACK"`, 1), func(m *Message) bool { return m.Type == Ack }},
		{"fractional offset time", acl(`,"timestamp":"2025-11-23T10:00:00.123456789-05:30"`), func(m *Message) bool {
			return m.Timestamp.Equal(time.Date(2025, 11, 23, 15, 30, 0, 123456789, time.UTC)) && m.Timestamp.Location() == time.UTC
		}},
		{"null optionals", acl(`,"task_id":null,"in_reply_to":null,"status":null,"error":null,"priority":null,"timestamp":null,"metadata":null`),
			func(m *Message) bool {
				return m.TaskID == "" && m.Error == nil && m.Priority == Medium && m.Metadata == nil
			}},
		{"acl payload null", strings.Replace(acl(""), `{"operation":"update"}`, `null`, 1), func(m *Message) bool { return m.Payload == nil }},
		{"sam response without in_reply_to", strings.Replace(sam(""), `"REQUEST"`, `"RESPONSE"`, 1), func(m *Message) bool {
			return m.Type == Response && m.InReplyTo == "" && m.CorrelationID == "c-1"
		}},
		{"sam error severity lowercase", sam(`,"error":{"code":"C","message":"m","severity":"fatal","retryable":true}`), func(m *Message) bool {
			return m.Error.Severity == "FATAL" && m.Error.Fatal() && *m.Error.Retryable
		}},
		{"sam error retryable null", sam(`,"error":{"code":"C","message":"m","retryable":null,"source":null}`), func(m *Message) bool {
			return m.Error.Retryable == nil
		}},
		{"acl error code not string", strings.Replace(acl(`,"error":"boom"`), `"operation":"update"`, `"error_code":404`, 1), func(m *Message) bool {
			return m.Error.Message == "boom" && m.Error.Code == ""
		}},
		{"acl status and error on response", strings.Replace(acl(`,"in_reply_to":"m0","status":"failed","error":"boom"`), `"request"`, `"response"`, 1), func(m *Message) bool {
			return m.Error.Message == "boom" && m.Status == "failed"
		}},
		{"payload whitespace compacted", strings.Replace(acl(""), `{"operation":"update"}`, "{ \"a\" : [ 1 , 2 ] ,\n\"b\":\" x \" }", 1), func(m *Message) bool {
			return string(m.Payload) == `{"a":[1,2],"b":" x "}`
		}},
		{"escaped values", acl(`,"status":"\u00e9\ud83d\ude00\n"`), func(m *Message) bool { return m.Status == "é😀\n" }},
		{"many keys", acl(`,"metadata":{` + manyKeys(100) + `}`), func(m *Message) bool { return m.Metadata != nil }},
		{"whitespace around", " \n" + acl("") + "\n ", func(m *Message) bool { return m.ID == "msg_001" }},
		{"acl group send", `{"message_type":"notification","sender_id":"s","action":"a","receiver_id":null,"receiver_type":"executor"}`, func(m *Message) bool {
			return m.Recipient == nil && m.GroupType == "executor"
		}},
		{"acl group send without receiver_id", `{"message_type":"notification","sender_id":"s","action":"a","receiver_type":"executor"}`, func(m *Message) bool {
			return m.Recipient == nil && m.GroupType == "executor"
		}},
		{"sam group send", `{"sender":{"agent_id":"s"},"recipient":{"agent_id":null,"role":"executor"},"message_type":"EVENT","payload":{"action":"a"}}`, func(m *Message) bool {
			return m.Recipient == nil && m.GroupType == "executor"
		}},
		{"sam group send without agent_id", `{"sender":{"agent_id":"s"},"recipient":{"role":"executor"},"message_type":"ERROR","error":{"code":"C","message":"m"}}`, func(m *Message) bool {
			return m.Recipient == nil && m.GroupType == "executor"
		}},
		{"acl broadcast keeps no type", `{"message_type":"notification","sender_id":"s","action":"a","receiver_id":null,"receiver_type":null}`, func(m *Message) bool {
			return m.Recipient == nil && m.GroupType == ""
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode([]byte(tc.in))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !tc.check(m) {
				t.Errorf("unexpected message %+v", m)
			}
			roundTrip(t, m)
		})
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strings.Repeat("x", i) + `":1`)
	}
	return b.String()
}

// TestSyntaxReasons pins the wording and offset of each token-level error:
// the scanner takes its tokens from internal/jsonlex but words their errors
// itself. `{"status":` is 10 bytes, so a value starts at offset 10.
func TestSyntaxReasons(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"status":"ok` + "\xff" + `"}`, "status: invalid JSON at offset 13: invalid UTF-8 in string"},
		// A character cut off by the end of the input is a cut-off
		// document, like every other token cut short.
		{`{"status":"` + "\xe2\x82", "status: invalid JSON at offset 13: unterminated string"},
		{`{"status":"a` + "\x01" + `"}`, "status: invalid JSON at offset 12: control character in string"},
		{`{"status":"a\x"}`, "status: invalid JSON at offset 12: invalid escape"},
		{`{"status":"\u12G4"}`, `status: invalid JSON at offset 11: invalid \u escape`},
		{`{"status":"\u12"}`, `status: invalid JSON at offset 11: invalid \u escape`},
		// An unpaired surrogate is reported after its escape.
		{`{"status":"\ude00"}`, "status: invalid JSON at offset 17: lone low surrogate escape"},
		{`{"status":"\uDFFF"}`, "status: invalid JSON at offset 17: lone low surrogate escape"},
		{`{"status":"\ud800"}`, "status: invalid JSON at offset 17: lone high surrogate escape"},
		{`{"status":"\uDBFFx"}`, "status: invalid JSON at offset 17: lone high surrogate escape"},
		{`{"status":"\ud83d\ud83d"}`, "status: invalid JSON at offset 17: lone high surrogate escape"},
		{`{"status":"\ud83d\u0041"}`, "status: invalid JSON at offset 17: lone high surrogate escape"},
		{`{"status":"x\ud83d"`, "status: invalid JSON at offset 18: lone high surrogate escape"},
		{`{"status":"abc`, "status: invalid JSON at offset 14: unterminated string"},
		{`{"status":01}`, "status: invalid JSON at offset 11: invalid number: leading zero"},
		{`{"status":-01}`, "status: invalid JSON at offset 12: invalid number: leading zero"},
		{`{"status":-}`, "status: invalid JSON at offset 11: invalid number"},
		{`{"status":-x}`, "status: invalid JSON at offset 11: invalid number"},
		{`{"status":1.}`, "status: invalid JSON at offset 12: invalid number: no digits after '.'"},
		{`{"status":1e}`, "status: invalid JSON at offset 12: invalid number: no digits in exponent"},
		{`{"status":1E+}`, "status: invalid JSON at offset 13: invalid number: no digits in exponent"},
		{`{"status":1x}`, "envelope: invalid JSON at offset 11: expected ',' or '}' in object"},
		{`{"status":nul}`, "status: invalid JSON at offset 10: invalid literal"},
		{`{"status":tru`, "status: invalid JSON at offset 10: invalid literal"},
		{`{"status":fals}`, "status: invalid JSON at offset 10: invalid literal"},
		{`{"status":x}`, `status: invalid JSON at offset 10: unexpected character 'x'`},
		{`{"status":`, "status: invalid JSON at offset 10: unexpected end of input"},
		{`{"a\x":1}`, "envelope: invalid JSON at offset 3: invalid escape"},
		{`{"metadata":{"n":[1,"\udc00"]}}`, "metadata.n[1]: invalid JSON at offset 27: lone low surrogate escape"},
		// Input that ends inside a token is cut short, not malformed: it
		// reads as every other cut-off string (`{"status":"abc` above) or
		// value (`{"status":` above), at the input's length, wherever in
		// the token it ends. The high surrogate may have been paired, and
		// "\u12" may have gone on "34".
		{`{"status":"a\`, "status: invalid JSON at offset 13: unterminated string"},
		{`{"status":"\u12`, "status: invalid JSON at offset 15: unterminated string"},
		{`{"status":"\ud83d`, "status: invalid JSON at offset 17: unterminated string"},
		{`{"status":"\ud83d\`, "status: invalid JSON at offset 18: unterminated string"},
		{`{"status":"\ud83d\u12`, "status: invalid JSON at offset 21: unterminated string"},
		{`{"status":-`, "status: invalid JSON at offset 11: unexpected end of input"},
		{`{"status":1.`, "status: invalid JSON at offset 12: unexpected end of input"},
		{`{"status":1e-`, "status: invalid JSON at offset 13: unexpected end of input"},
		// What is wrong after a high surrogate is the malformed escape that
		// follows it, as it would be anywhere else (`\u12G4` above).
		{`{"status":"\ud83d\uXXXX"}`, `status: invalid JSON at offset 17: invalid \u escape`},
	}
	for _, tc := range tests {
		_, err := Decode([]byte(tc.in))
		if err == nil || err.Error() != tc.want {
			t.Errorf("Decode(%#q) = %v\n want %s", tc.in, err, tc.want)
		}
	}
}

func TestDuplicateAmongManyKeys(t *testing.T) {
	in := acl(`,"metadata":{` + manyKeys(100) + `,"kxxx":2}`)
	_, err := Decode([]byte(in))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "metadata.kxxx" || fe.Reason != "duplicate key" {
		t.Fatalf("Decode = %v; want metadata.kxxx: duplicate key", err)
	}
}

func TestErrorEchoIsBounded(t *testing.T) {
	huge := strings.Repeat("Q", 10000)
	tests := []string{
		strings.Replace(acl(""), `"msg_001"`, `"`+huge+`"`, 1),
		acl(`,"` + huge + `":1`),
		acl(`,"priority":"` + huge + `"`),
		strings.Replace(acl(""), `"request"`, `"`+huge+`"`, 1),
		acl(`,"timestamp":"` + huge + `"`),
		acl(`,"metadata":{"` + huge + `":{"` + huge + `":[` + huge[:1] + `]}}`),
		sam(`,"error":{"code":"C","message":"m","severity":"` + huge + `"}`),
	}
	for i, in := range tests {
		_, err := Decode([]byte(in))
		if err == nil {
			t.Fatalf("case %d: accepted", i)
		}
		if n := strings.Count(err.Error(), "Q"); n > maxEcho {
			t.Errorf("case %d: error echoes %d bytes of input: %.200s", i, n, err)
		}
	}
}

func TestFieldErrorString(t *testing.T) {
	if got := (&FieldError{Field: "sender.agent_id", Reason: "required"}).Error(); got != "sender.agent_id: required" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&FieldError{Reason: "must be a JSON object"}).Error(); got != "envelope: must be a JSON object" {
		t.Errorf("Error() = %q", got)
	}
}

func TestMarshalGolden(t *testing.T) {
	tests := []struct {
		name string
		m    func(t *testing.T) *Message
		want string
	}{
		{"acl fixture", func(t *testing.T) *Message {
			m, err := Decode(readFixture(t, "acl/flow1_request.json"))
			if err != nil {
				t.Fatal(err)
			}
			return m
		}, `{"message_id":"msg_001","message_type":"request","priority":"high","sender_id":"orch_1","sender_type":"orchestrator",` +
			`"receiver_id":"planner_1","receiver_type":"planner","workflow_id":"wf_abc","action":"plan_workflow",` +
			`"payload":{"operation":"update","target_customer_id":"CUST001","parameters":{"credit_limit":100000}}}`},
		{"acl broadcast", func(t *testing.T) *Message {
			m, err := Decode(readFixture(t, "acl/notification.json"))
			if err != nil {
				t.Fatal(err)
			}
			return m
		}, `{"message_type":"notification","priority":"medium","sender_id":"executor_1","sender_type":"executor","receiver_id":null,` +
			`"workflow_id":"wf_12345","action":"task_completed","payload":{"task_id":"task_2","result":"Database updated successfully","affected_records":1}}`},
		{"sam fixture", func(t *testing.T) *Message {
			m, err := Decode(readFixture(t, "sam/error.json"))
			if err != nil {
				t.Fatal(err)
			}
			return m
		}, `{"message_id":"msg-uuid-1235","correlation_id":"corr-uuid-5678","timestamp":"2025-11-23T09:00:02.25Z",` +
			`"sender":{"agent_id":"compliance_agent","role":"validator"},"recipient":{"agent_id":"orchestrator","role":"orchestrator"},` +
			`"message_type":"ERROR","error":{"code":"VALIDATION_FAILED","message":"Tax ID format is invalid","source":"compliance_agent","severity":"CRITICAL","retryable":false}}`},
		{"acl NewError", func(*testing.T) *Message {
			return NewError(ACL, Party{ID: "gateway"}, &Party{ID: "orch_1", Role: "orchestrator"}, "msg_003", "wf_abc", "ignored",
				"TIMEOUT", "executor_1 did not answer <in time>", true, "ERROR")
		}, `{"message_type":"error","priority":"medium","sender_id":"gateway","receiver_id":"orch_1","receiver_type":"orchestrator",` +
			`"workflow_id":"wf_abc","action":"gateway_error","payload":{"error_code":"TIMEOUT"},"in_reply_to":"msg_003",` +
			`"error":"executor_1 did not answer <in time>"}`},
		{"sam NewError", func(*testing.T) *Message {
			return NewError(SAM, Party{ID: "gateway", Role: "gateway"}, &Party{ID: "a1"}, "m-1", "ignored", "c-1",
				"FORBIDDEN", "not allowed", false, "fatal")
		}, `{"correlation_id":"c-1","sender":{"agent_id":"gateway","role":"gateway"},"recipient":{"agent_id":"a1"},` +
			`"message_type":"ERROR","metadata":{"in_reply_to":"m-1"},` +
			`"error":{"code":"FORBIDDEN","message":"not allowed","source":"gateway","severity":"FATAL","retryable":false}}`},
		{"sam NewResponse", func(*testing.T) *Message {
			return NewResponse(SAM, Party{ID: "human:alice"}, &Party{ID: "a1"}, "m-1", "", "c-1", "human_decision",
				json.RawMessage(`{ "decision": "approve", "note": "ok" }`))
		}, `{"correlation_id":"c-1","sender":{"agent_id":"human:alice"},"recipient":{"agent_id":"a1"},"message_type":"RESPONSE",` +
			`"payload":{"decision":"approve","note":"ok","action":"human_decision"},"metadata":{"in_reply_to":"m-1"}}`},
		{"acl NewResponse", func(*testing.T) *Message {
			return NewResponse(ACL, Party{ID: "human:alice"}, &Party{ID: "orch_1"}, "msg_001", "wf_abc", "", "human_decision",
				json.RawMessage(`{"decision":"reject"}`))
		}, `{"message_type":"response","priority":"medium","sender_id":"human:alice","receiver_id":"orch_1","workflow_id":"wf_abc",` +
			`"action":"human_decision","payload":{"decision":"reject"},"in_reply_to":"msg_001"}`},
		{"acl group send", func(t *testing.T) *Message {
			m, err := Decode([]byte(`{"message_type":"notification","sender_id":"orch_1","receiver_type":"executor","workflow_id":"w","action":"go"}`))
			if err != nil {
				t.Fatal(err)
			}
			return m
		}, `{"message_type":"notification","priority":"medium","sender_id":"orch_1","receiver_id":null,"receiver_type":"executor",` +
			`"workflow_id":"w","action":"go"}`},
		{"sam group send", func(t *testing.T) *Message {
			m, err := Decode([]byte(`{"sender":{"agent_id":"o"},"recipient":{"role":"executor"},"message_type":"EVENT","payload":{"action":"go"}}`))
			if err != nil {
				t.Fatal(err)
			}
			return m
		}, `{"sender":{"agent_id":"o"},"recipient":{"agent_id":null,"role":"executor"},"message_type":"EVENT","payload":{"action":"go"}}`},
		{"filled", func(*testing.T) *Message {
			m := NewResponse(ACL, Party{ID: "p"}, &Party{ID: "o"}, "m0", "", "", "done", nil)
			m.Fill(time.Date(2025, 11, 23, 10, 0, 0, 500, time.FixedZone("X", 3600)), func() string { return "gw-1" })
			return m
		}, `{"message_id":"gw-1","message_type":"response","timestamp":"2025-11-23T09:00:00.0000005Z","priority":"medium",` +
			`"sender_id":"p","receiver_id":"o","action":"done","in_reply_to":"m0"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m(t)
			out := roundTrip(t, m)
			if string(out) != tc.want {
				t.Errorf("Marshal:\n got %s\nwant %s", out, tc.want)
			}
		})
	}
}

// TestMarshalMirroredFields changes the fields that live inside payload and
// metadata and checks they are rewritten in place.
func TestMarshalMirroredFields(t *testing.T) {
	m, err := Decode(readFixture(t, "sam/request.json"))
	if err != nil {
		t.Fatal(err)
	}
	m.Priority = Critical
	m.TimeoutMS = 250
	m.InReplyTo = "m-0"
	m.Action = "revalidate_vendor"
	out, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if back.Priority != Critical || back.TimeoutMS != 250 || back.InReplyTo != "m-0" || back.Action != "revalidate_vendor" {
		t.Errorf("fields lost: %+v", back)
	}
	if want := `{"priority":"critical","timeout_ms":250,"in_reply_to":"m-0"}`; string(back.Metadata) != want {
		t.Errorf("metadata = %s; want %s", back.Metadata, want)
	}
	if !strings.HasPrefix(string(back.Payload), `{"action":"revalidate_vendor","data":{`) {
		t.Errorf("payload = %s", back.Payload)
	}

	// Clearing removes the keys; the default priority stays as stated.
	back.Priority, back.TimeoutMS, back.InReplyTo = Medium, 0, ""
	back.Type, back.Action = Response, ""
	out, err = back.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Metadata) != `{"priority":"medium"}` || strings.Contains(string(again.Payload), `"action"`) {
		t.Errorf("metadata %s payload %s", again.Metadata, again.Payload)
	}

	// ACL: error code and timeout.
	a, err := Decode(readFixture(t, "acl/error.json"))
	if err != nil {
		t.Fatal(err)
	}
	a.Error.Code = "GONE"
	a.TimeoutMS = 1000
	b := roundTripChanged(t, a)
	if string(b.Payload) != `{"error_code":"GONE","customer_id":"CUST999"}` || string(b.Metadata) != `{"timeout_ms":1000}` {
		t.Errorf("payload %s metadata %s", b.Payload, b.Metadata)
	}
}

func roundTripChanged(t *testing.T, m *Message) *Message {
	t.Helper()
	out, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return back
}

func TestMarshalRejectsInvalid(t *testing.T) {
	valid := func() *Message {
		return NewResponse(SAM, Party{ID: "a"}, &Party{ID: "b"}, "m", "", "c", "act", nil)
	}
	tests := []struct {
		name  string
		edit  func(*Message)
		field string
	}{
		{"format", func(m *Message) { m.Format = "xml" }, "format"},
		{"type", func(m *Message) { m.Type = "notification" }, "message_type"},
		{"priority", func(m *Message) { m.Priority = "" }, "metadata.priority"},
		{"sender", func(m *Message) { m.Sender.ID = "" }, "sender.agent_id"},
		{"recipient", func(m *Message) { m.Type, m.Recipient = Request, nil }, "recipient"},
		{"payload not object", func(m *Message) { m.Payload = json.RawMessage(`[1]`) }, "payload"},
		{"payload dup", func(m *Message) { m.Payload = json.RawMessage(`{"a":1,"a":2}`) }, "payload.a"},
		{"metadata invalid", func(m *Message) { m.Metadata = json.RawMessage(`{"a":`) }, "metadata.a"},
		{"metadata not object", func(m *Message) { m.Metadata = json.RawMessage(`"x"`) }, "metadata"},
		{"workflow in sam", func(m *Message) { m.WorkflowID = "w" }, "workflow_id"},
		{"timeout", func(m *Message) { m.TimeoutMS = -5 }, "metadata.timeout_ms"},
		{"error without code", func(m *Message) { m.Type, m.Error = Error, &ErrorInfo{Message: "x"} }, "error.code"},
		{"year", func(m *Message) { m.Timestamp = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "timestamp"},
		{"group and recipient", func(m *Message) { m.Type, m.GroupType = Event, "executor" }, "recipient.agent_id"},
		{"group response", func(m *Message) { m.Recipient, m.GroupType = nil, "executor" }, "recipient"},
		{"group type too long", func(m *Message) { m.Type, m.Recipient, m.GroupType = Event, nil, strings.Repeat("t", 65) }, "recipient.role"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := valid()
			if _, err := m.Marshal(); err != nil {
				t.Fatalf("base message invalid: %v", err)
			}
			tc.edit(m)
			_, err := m.Marshal()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("Marshal error = %v; want field %q", err, tc.field)
			}
		})
	}
}

func TestFill(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	calls := 0
	newID := func() string { calls++; return "gen" }

	m := &Message{}
	m.Fill(now, newID)
	if m.ID != "gen" || !m.Timestamp.Equal(now) || calls != 1 {
		t.Errorf("Fill on empty: %+v, %d calls", m, calls)
	}
	stamp := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	m = &Message{ID: "keep", Timestamp: stamp}
	m.Fill(now, newID)
	if m.ID != "keep" || !m.Timestamp.Equal(stamp) || calls != 1 {
		t.Errorf("Fill overwrote: %+v, %d calls", m, calls)
	}
	m = &Message{}
	m.Fill(time.Now(), nil) // monotonic reading dropped, nil newID tolerated
	if m.ID != "" || m.Timestamp != m.Timestamp.Round(0) || m.Timestamp.Location() != time.UTC {
		t.Errorf("Fill(time.Now(), nil) = %+v", m)
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		m        Message
		kind, id string
	}{
		{Message{Format: ACL, WorkflowID: "wf"}, "workflow", "wf"},
		{Message{Format: ACL, CorrelationID: "c"}, "", ""},
		{Message{Format: SAM, CorrelationID: "c"}, "correlation", "c"},
		{Message{Format: SAM, WorkflowID: "wf"}, "", ""},
	}
	for _, tc := range tests {
		if kind, id := tc.m.Key(); kind != tc.kind || id != tc.id {
			t.Errorf("%+v.Key() = %q, %q; want %q, %q", tc.m, kind, id, tc.kind, tc.id)
		}
	}
}

func TestRankAndFatal(t *testing.T) {
	for p, want := range map[Priority]int{Critical: 0, High: 1, Medium: 2, Low: 3, "": 4, "HIGH": 4} {
		if got := p.Rank(); got != want {
			t.Errorf("%q.Rank() = %d; want %d", p, got, want)
		}
	}
	for sev, want := range map[string]bool{"CRITICAL": true, "fatal": true, "ERROR": false, "": false} {
		if got := (&ErrorInfo{Severity: sev}).Fatal(); got != want {
			t.Errorf("Fatal(%q) = %v", sev, got)
		}
	}
	if (*ErrorInfo)(nil).Fatal() {
		t.Error("nil ErrorInfo is fatal")
	}
}

func TestConstructorsDoNotAlias(t *testing.T) {
	to := &Party{ID: "b"}
	payload := json.RawMessage(`{"x":1}`)
	m := NewResponse(ACL, Party{ID: "a"}, to, "m", "w", "", "act", payload)
	to.ID = "changed"
	payload[2] = 'y'
	if m.Recipient.ID != "b" || string(m.Payload) != `{"x":1}` {
		t.Errorf("constructor aliases its arguments: %+v %s", m.Recipient, m.Payload)
	}
}

func TestAppendString(t *testing.T) {
	for _, in := range []string{"", "plain", `q"b\`, "\x00\x1f\b\f\n\r\t\x7f", "é😀\u2028<>&", "a\xffb", strings.Repeat("x", 300)} {
		out := appendString(nil, in)
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("appendString(%q) = %s: %v", in, out, err)
		}
		if want := strings.ToValidUTF8(in, "\uFFFD"); got != want {
			t.Errorf("appendString(%q) decodes to %q", in, got)
		}
		if strings.Contains(string(out), `\u003c`) {
			t.Errorf("appendString HTML-escaped: %s", out)
		}
	}
}

func TestCompact(t *testing.T) {
	for _, in := range []string{
		`{ "a" : "x \" y" , "b" : [ 1 , { } ] }`,
		"{\n\t\"k\\\\\" : \"v \\\\\"\r\n}",
		`{"s":"  spaced  ","e":"\u0020"}`,
	} {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(in)); err != nil {
			t.Fatalf("bad test input %q: %v", in, err)
		}
		if got := compact([]byte(in)); string(got) != want.String() {
			t.Errorf("compact(%q) = %s; want %s", in, got, want.String())
		}
		if isCompact([]byte(in)) != (in == want.String()) || !isCompact(want.Bytes()) {
			t.Errorf("isCompact wrong for %q", in)
		}
	}
}
