package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/policy"
)

// record appends an audit entry. It is synchronous in both fail modes: an
// approval is worth an fsync, and it keeps the order of entries equal to
// the order of the steps (door.Recorder.Durable). In closed mode a failure
// is a 503 and the caller must not let the step take effect.
func (s *Service) record(ctx context.Context, rec audit.Record) error {
	return s.audit.Durable(ctx, rec)
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
