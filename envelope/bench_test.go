package envelope

import (
	"testing"
)

// Realistic envelopes of about 1 KB: a SAM envelope's request and an ACL
// envelope's plan response with a typical payload.
const benchSAM = `{
  "message_id": "msg-2f1c9a7e-8b4d-4c1e-9f3a-6d2b7c8e1a90",
  "correlation_id": "corr-7d3e2a1b-5c6f-4e8d-a9b0-1c2d3e4f5a6b",
  "timestamp": "2025-11-23T10:00:00.123Z",
  "sender": {"agent_id": "vendor_onboarding_agent", "role": "initiator"},
  "recipient": {"agent_id": "compliance_agent", "role": "validator"},
  "message_type": "REQUEST",
  "payload": {
    "action": "validate_vendor",
    "data": {
      "vendor_id": "v-123", "name": "Acme Corp", "tax_id": "12-3456789",
      "address": {"street": "1 Main St", "city": "Springfield", "country": "US", "postal_code": "12345"},
      "contacts": [{"name": "Jane Doe", "email": "jane@acme.example", "phone": "+1-555-0100"},
                   {"name": "John Roe", "email": "john@acme.example", "phone": "+1-555-0101"}],
      "bank": {"iban": "DE89370400440532013000", "bic": "COBADEFFXXX"},
      "categories": ["hardware", "software", "services"]
    },
    "context": {
      "workflow_id": "wf-101", "current_agent": "vendor_onboarding_agent",
      "history": [{"agent": "vendor_agent", "action": "collected_data", "timestamp": "2025-11-23T09:59:58Z"}],
      "notes": "Vendor requested expedited onboarding; documents attached in the artifacts section."
    }
  },
  "metadata": {"priority": "high", "timeout_ms": 5000, "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}
}`

const benchACL = `{
  "message_id": "msg_002",
  "message_type": "response",
  "timestamp": "2025-11-23T10:00:01.5Z",
  "priority": "high",
  "sender_id": "planner_1",
  "sender_type": "planner",
  "receiver_id": "orch_1",
  "receiver_type": "orchestrator",
  "workflow_id": "wf_abc",
  "task_id": "t0",
  "action": "plan_complete",
  "in_reply_to": "msg_001",
  "payload": {
    "tasks": [
      {"task_id": "t1", "description": "Fetch customer CUST001 with current limits", "agent_type": "executor"},
      {"task_id": "t2", "description": "Update record: credit_limit to 100000", "agent_type": "executor"},
      {"task_id": "t3", "description": "Validate the update against policy", "agent_type": "validator"},
      {"task_id": "t4", "description": "Notify account manager of the change", "agent_type": "notifier"}
    ],
    "estimated_duration_ms": 4200,
    "operation": "update",
    "customer_id": "CUST001",
    "parameters": {"credit_limit": 100000, "currency": "EUR", "reason": "annual review"}
  },
  "status": "success",
  "metadata": {"timeout_ms": 30000, "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "attempt": 1}
}`

func benchDecode(b *testing.B, in string, decode func([]byte) (*Message, error)) {
	raw := []byte(in)
	if _, err := decode(raw); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeSAM(b *testing.B) { benchDecode(b, benchSAM, DecodeSAM) }

func BenchmarkDecodeACL(b *testing.B) { benchDecode(b, benchACL, DecodeACL) }

func BenchmarkMarshal(b *testing.B) {
	for _, tc := range []struct{ name, in string }{{"SAM", benchSAM}, {"ACL", benchACL}} {
		b.Run(tc.name, func(b *testing.B) {
			m, err := Decode([]byte(tc.in))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Marshal(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
