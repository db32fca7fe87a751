package mcpauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// Key is the store key of a secret: its SHA-256, in hex.
func Key(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// Secret returns a fresh random secret (256 bits) with prefix.
func Secret(prefix string) string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}
