package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/policy"
)

// record appends an audit entry. It is synchronous in both fail modes: an
// approval is worth an fsync, and it keeps the order of entries equal to
// the order of the steps. The append is detached from the client's context
// because a client that hangs up must not cancel the record of what it did.
//
// In closed mode a failure is a 503 (apierror.AuditUnavailable) and the
// caller must not let the step take effect; in open mode it is logged and
// nil is returned.
func (s *Service) record(ctx context.Context, rec audit.Record) error {
	_, err := s.audit.Append(context.WithoutCancel(ctx), rec)
	if err == nil {
		return nil
	}
	s.log.Error("audit entry not written", "kind", rec.Kind, "request_id", rec.RequestID, "fail_closed", s.failClosed, "error", err.Error())
	if !s.failClosed {
		return nil
	}
	return apierror.AuditUnavailable(fmt.Errorf("audit %s: %w", rec.Kind, err))
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// violationsSummary is the audit form of violations: rule ids and
// descriptions, which are the policy's text, never the request's content.
func violationsSummary(vs []policy.Violation) []any {
	out := make([]any, 0, len(vs))
	for _, v := range vs {
		out = append(out, map[string]any{"rule": v.Rule, "description": v.Description})
	}
	return out
}
