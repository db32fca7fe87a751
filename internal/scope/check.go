package scope

import "github.com/sacpgw/gateway/audit"

// Names of the checks an exchange records.
const (
	CheckAuth             = "auth"
	CheckLimits           = "limits"
	CheckRBAC             = "rbac"
	CheckPolicy           = "policy"
	CheckRequestRedaction = "request_redaction"
	CheckProtocol         = "protocol"
	CheckRedaction        = "redaction"
	CheckGuardrails       = "guardrails"
	CheckAnswer           = "answer"

	// numChecks is how many checks there are: all an exchange can record.
	numChecks = 9
)

// Verdict is one check's outcome on an exchange: the audit entry's
// checks.<Check> object. Which fields a check sets is fixed by the check
// (docs/reference/audit-format.md); an unset field is not written.
type Verdict struct {
	Check   string
	Verdict string

	Method string // auth: token or sidecar

	Requests       string // limits: the agent's rate and token limits
	Tokens         string
	TokensReserved int
	Dimension      string // limits, when rejected: requests or tokens

	DecisionID    string // policy, guardrails: the decision's identity
	Revision      string
	Reasons       []string // policy: why it denied
	FailClosed    bool     // policy, guardrails: the decision failed closed
	From          string   // guardrails: the status it overrode
	RedactMessage bool     // guardrails: the message was withheld
	Reason        string   // guardrails, answer: why

	Count    int      // redaction checks: values redacted (written whenever Verdict is "applied")
	Detector string   // request_redaction: the blocking detector
	Blocked  string   // redaction: the blocking detector
	Fields   []string // redaction of protocol answers: the fields scanned

	Attempts       int // protocol: model calls
	TemplateSHA256 string
	Format         string // protocol: sacp_compact
	OutFmt         string
	Answer         string // protocol, compact: what the client got
}

// Encode writes v into o as the audit trail writes it: the verdict and
// the fields its check sets, nothing else.
func (v Verdict) Encode(o *audit.Object) {
	o.Str("verdict", v.Verdict)
	str := func(k, s string) {
		if s != "" {
			o.Str(k, s)
		}
	}
	str("method", v.Method)
	str("requests", v.Requests)
	str("tokens", v.Tokens)
	if v.TokensReserved != 0 {
		o.Int("tokens_reserved", int64(v.TokensReserved))
	}
	str("dimension", v.Dimension)
	str("decision_id", v.DecisionID)
	str("revision", v.Revision)
	if v.Reasons != nil {
		o.Strs("reasons", v.Reasons)
	}
	if v.FailClosed {
		o.Bool("fail_closed", true)
	}
	str("from", v.From)
	if v.RedactMessage {
		o.Bool("redact_message", true)
	}
	str("reason", v.Reason)
	if v.Verdict == "applied" {
		// Zero included: "applied, nothing found" is a finding.
		o.Int("count", int64(v.Count))
	}
	str("detector", v.Detector)
	str("blocked", v.Blocked)
	if v.Fields != nil {
		o.Strs("fields", v.Fields)
	}
	if v.Attempts != 0 {
		o.Int("attempts", int64(v.Attempts))
	}
	str("template_sha256", v.TemplateSHA256)
	str("format", v.Format)
	str("out_fmt", v.OutFmt)
	str("answer", v.Answer)
}

// Check records a check's verdict; a check recorded again (the redaction
// of a re-asked answer) replaces its earlier verdict.
func (ex *Exchange) Check(v Verdict) {
	for i := range ex.Checks {
		if ex.Checks[i].Check == v.Check {
			ex.Checks[i] = v
			return
		}
	}
	if ex.Checks == nil {
		// Room for every check at once: a Verdict is a few hundred
		// bytes, and growing the slice one append at a time allocated
		// and copied them four times over on every request.
		ex.Checks = make([]Verdict, 0, numChecks)
	}
	ex.Checks = append(ex.Checks, v)
}

// Verdict returns the verdict recorded for check, if any.
func (ex *Exchange) Verdict(check string) (Verdict, bool) {
	for _, v := range ex.Checks {
		if v.Check == check {
			return v, true
		}
	}
	return Verdict{}, false
}
