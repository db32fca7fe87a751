package siem

import (
	"encoding/json"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/sacpgw/gateway/audit"
)

// Attribute names. Where an OpenTelemetry semantic convention names a
// fact (GenAI, HTTP, user, session, error, client), its name is used, so
// a SIEM's OpenTelemetry mapping reads it without configuration; the
// entry's own facts (its place in the chain) are under gateway.audit.*,
// as the gateway's spans put their own under gateway.*.
const (
	AttrChain         = "gateway.audit.chain"
	AttrSeq           = "gateway.audit.seq"
	AttrHash          = "gateway.audit.hash"
	AttrPrevHash      = "gateway.audit.prev_hash"
	AttrKind          = "gateway.audit.kind"
	AttrRequestID     = "gateway.request_id"
	AttrPayloadSHA256 = "gateway.audit.payload_sha256"
	AttrUpstream      = "gateway.upstream"
)

// scopeName is the instrumentation scope of the records.
const scopeName = "github.com/sacpgw/gateway/audit"

// eventPrefix makes an entry's kind its record's event name.
const eventPrefix = "gateway.audit."

// resource describes the process the records come from: the service and,
// as its instance, the chain (the pod or host that writes it).
func resource(service, version, chain string) *resourcepb.Resource {
	attrs := []*commonpb.KeyValue{str(string(semconv.ServiceNameKey), service), str(string(semconv.ServiceInstanceIDKey), chain)}
	if version != "" {
		attrs = append(attrs, str(string(semconv.ServiceVersionKey), version))
	}
	return &resourcepb.Resource{Attributes: attrs}
}

// request is one export of lines, in seq order.
func request(res *resourcepb.Resource, lines []audit.Line, observed time.Time) *collogspb.ExportLogsServiceRequest {
	records := make([]*logspb.LogRecord, len(lines))
	for i, l := range lines {
		records[i] = record(l, observed)
	}
	return &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource:  res,
		ScopeLogs: []*logspb.ScopeLogs{{Scope: &commonpb.InstrumentationScope{Name: scopeName}, LogRecords: records}},
	}}}
}

// record is one entry as a log record: its body the line exactly as the
// trail holds it, its time the entry's.
func record(l audit.Line, observed time.Time) *logspb.LogRecord {
	e := l.Entry
	sev, text := severity(e)
	body := &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: string(l.Raw)}}
	if !utf8.Valid(l.Raw) {
		// A protobuf string must be UTF-8; the bytes still go as they are.
		body.Value = &commonpb.AnyValue_BytesValue{BytesValue: l.Raw}
	}
	return &logspb.LogRecord{
		TimeUnixNano:         uint64(e.TS.UnixNano()),
		ObservedTimeUnixNano: uint64(observed.UnixNano()),
		SeverityNumber:       sev,
		SeverityText:         text,
		EventName:            eventPrefix + e.Kind,
		Body:                 body,
		Attributes:           attributes(e),
	}
}

// severity: the trail's own failures are errors, refusals and failed
// answers warnings or errors by their status, the rest information.
func severity(e audit.Entry) (logspb.SeverityNumber, string) {
	const (
		info, warn, errs = logspb.SeverityNumber_SEVERITY_NUMBER_INFO, logspb.SeverityNumber_SEVERITY_NUMBER_WARN, logspb.SeverityNumber_SEVERITY_NUMBER_ERROR
	)
	switch e.Kind {
	case audit.KindLoss:
		return errs, "ERROR"
	case audit.KindRecovery, audit.KindAuthFailure, audit.KindRateLimitReject, "message.reject":
		return warn, "WARN"
	}
	var s struct {
		Status json.RawMessage `json:"status"`
		OK     *bool           `json:"ok"`
	}
	_ = json.Unmarshal(e.Summary, &s)
	var status int
	_ = json.Unmarshal(s.Status, &status)
	switch {
	case status >= 500:
		return errs, "ERROR"
	case status >= 400:
		return warn, "WARN"
	case s.OK != nil && !*s.OK: // a reload that failed
		return warn, "WARN"
	}
	return info, "INFO"
}

// summaryFacts are the summary members that have a convention's name.
type summaryFacts struct {
	Model     string          `json:"model"`
	Route     string          `json:"route"`
	Upstream  string          `json:"upstream"`
	ErrorCode json.RawMessage `json:"error_code"`
	Status    json.RawMessage `json:"status"`
	Remote    string          `json:"remote"`
	Reviewer  string          `json:"reviewer"`
	Reader    string          `json:"reader"`
	By        string          `json:"by"`
	Tokens    struct {
		Prompt     *int64 `json:"prompt"`
		Completion *int64 `json:"completion"`
	} `json:"tokens"`
}

// attributes are the entry's place in the chain and its identities, plus
// what its summary says that a convention names. A summary member of an
// unexpected type is left out (it is in the body all the same).
func attributes(e audit.Entry) []*commonpb.KeyValue {
	a := []*commonpb.KeyValue{
		str(AttrChain, e.Chain), num(AttrSeq, e.Seq), str(AttrHash, e.Hash), str(AttrPrevHash, e.PrevHash), str(AttrKind, e.Kind),
	}
	add := func(k, v string) {
		if v != "" {
			a = append(a, str(k, v))
		}
	}
	add(string(semconv.GenAIAgentIDKey), e.AgentID)
	add(string(semconv.SessionIDKey), e.SessionID)
	add(AttrRequestID, e.RequestID)
	add(AttrPayloadSHA256, e.PayloadSHA256)
	// A member of an unexpected type stays zero; encoding/json still
	// reads the others.
	var s summaryFacts
	_ = json.Unmarshal(e.Summary, &s)
	if strings.HasPrefix(e.Kind, "llm.") || e.Kind == audit.KindRateLimitReject {
		add(string(semconv.GenAIRequestModelKey), s.Model)
	}
	add(string(semconv.HTTPRouteKey), s.Route)
	add(AttrUpstream, s.Upstream)
	add(string(semconv.UserIDKey), first(s.Reviewer, s.Reader, s.By))
	if addr, err := netip.ParseAddr(s.Remote); err == nil {
		add(string(semconv.ClientAddressKey), addr.String())
	}
	var code string
	if json.Unmarshal(s.ErrorCode, &code) == nil {
		add(string(semconv.ErrorTypeKey), code)
	}
	var status int64
	if json.Unmarshal(s.Status, &status) == nil && status >= 100 && status <= 599 {
		a = append(a, num(string(semconv.HTTPResponseStatusCodeKey), status))
	}
	if t := s.Tokens.Prompt; t != nil {
		a = append(a, num(string(semconv.GenAIUsageInputTokensKey), *t))
	}
	if t := s.Tokens.Completion; t != nil {
		a = append(a, num(string(semconv.GenAIUsageOutputTokensKey), *t))
	}
	return a
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func num(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}
