package a2a

import (
	"crypto/sha256"
	"encoding/hex"
)

// sha256Hex is the lowercase hex SHA-256 of b, as the audit trail writes
// payload digests.
func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
