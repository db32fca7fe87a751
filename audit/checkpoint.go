package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"
)

// Checkpoint attests that entry Seq of Chain had hash Hash at time TS. With
// a signing key, Signature is the standard base64 (with padding) of the
// ed25519 signature over SignedMessage() and KeyID names the key (see
// func KeyID); without one both are empty. A checkpoint line is the RFC 8785 form of this
// object; key_id is left out when empty, so the lines of unsigned
// checkpoints, and of checkpoints signed before key ids existed, are what
// they always were.
type Checkpoint struct {
	Chain     string `json:"chain"`
	Seq       int64  `json:"seq"`
	Hash      string `json:"hash"`
	TS        string `json:"ts"` // RFC 3339 UTC, nine fraction digits, as signed
	Signature string `json:"signature"`
	KeyID     string `json:"key_id,omitempty"`
	// Merkle is the chain's Merkle tree at Seq (merkle.go), on every
	// checkpoint from the one that marks the tree's start; Note is that
	// tree as a C2SP checkpoint signed with the same key, on signed ones.
	Merkle *TreeHead `json:"merkle,omitempty"`
	Note   string    `json:"note,omitempty"`
}

// keyIDLen is the length of a key id in hex digits (64 bits): enough to
// tell an operator's keys apart, short enough to read out. It is a name,
// not a security claim: the signature is always checked under the key.
const keyIDLen = 16

// spkiEd25519Prefix is the DER SubjectPublicKeyInfo of an ed25519 key up to
// the key's 32 bytes (RFC 8410): the bytes of a "PUBLIC KEY" PEM block are
// this prefix and the key.
var spkiEd25519Prefix = []byte{0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00}

// KeyID names a checkpoint signing key: the first 16 hex digits of the
// SHA-256 of its DER SubjectPublicKeyInfo, the bytes inside the .pub PEM
// file, so that anyone holding the .pub can compute it
// (openssl pkey -pubin -in k.pub -outform DER | sha256sum | cut -c1-16).
func KeyID(pub ed25519.PublicKey) string {
	h := sha256.New()
	h.Write(spkiEd25519Prefix)
	h.Write(pub)
	return hex.EncodeToString(h.Sum(nil))[:keyIDLen]
}

// SignedMessage is the exact byte string a checkpoint signature covers: the
// RFC 8785 canonical JSON of {"chain","hash","seq","ts"}, i.e.
//
//	{"chain":"gw-1","hash":"<64 hex>","seq":1000,"ts":"2026-01-02T03:04:05.000000000Z"}
//
// with ts exactly as written in the checkpoint line.
func (c Checkpoint) SignedMessage() []byte {
	b := appendMember([]byte{'{'}, "chain", c.Chain)
	b = appendMember(append(b, ','), "hash", c.Hash)
	b = fmt.Appendf(b, `,"seq":%d`, c.Seq)
	b = appendMember(append(b, ','), "ts", c.TS)
	return append(b, '}')
}

// appendMember appends "name":value, value a canonical JSON string.
func appendMember(b []byte, name, value string) []byte {
	b = append(append(append(b, '"'), name...), `":`...)
	return appendCanonicalString(b, value)
}

// line is the checkpoint's line in the checkpoints file, with its newline.
func (c Checkpoint) line() []byte {
	b := appendMember([]byte{'{'}, "chain", c.Chain)
	b = appendMember(append(b, ','), "hash", c.Hash)
	if c.KeyID != "" { // "key_id" sorts between "hash" and "seq"
		b = appendMember(append(b, ','), "key_id", c.KeyID)
	}
	if c.Merkle != nil { // "merkle" and "note" sort between "key_id" and "seq"
		b = c.Merkle.appendCanonical(append(b, `,"merkle":`...))
	}
	if c.Note != "" {
		b = appendMember(append(b, ','), "note", c.Note)
	}
	b = fmt.Appendf(b, `,"seq":%d`, c.Seq)
	b = appendMember(append(b, ','), "signature", c.Signature)
	b = appendMember(append(b, ','), "ts", c.TS)
	return append(b, "}\n"...)
}

// signCheckpoint signs c with key (nil: c stays unsigned). The key id is
// not part of the signed message: that message stays what third-party
// verifiers already check (docs/compliance.md), and a key id changed by
// someone only makes verify pick a key that fails, or none.
func signCheckpoint(c Checkpoint, key ed25519.PrivateKey) Checkpoint {
	if key != nil {
		c.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, c.SignedMessage()))
		c.KeyID = KeyID(key.Public().(ed25519.PublicKey))
	}
	return c
}

// verifySignature reports why c's signature does not verify under pub, or nil.
func (c Checkpoint) verifySignature(pub ed25519.PublicKey) error {
	if c.Signature == "" {
		return errors.New("checkpoint is not signed")
	}
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return errors.New("signature is not base64 of 64 bytes")
	}
	if !ed25519.Verify(pub, c.SignedMessage(), sig) {
		return errors.New("bad signature")
	}
	return nil
}

// checkpointFields are the members every checkpoint line has; key_id is
// the only optional one.
var checkpointFields = []string{"chain", "hash", "seq", "signature", "ts"}

// parseCheckpoint parses one checkpoints line strictly.
func parseCheckpoint(line []byte) (Checkpoint, error) {
	canon, fields, err := canonicalFields(line, checkpointFields)
	if err != nil {
		return Checkpoint{}, err
	}
	n := len(checkpointFields)
	for _, k := range []string{"key_id", "merkle", "note"} {
		if _, ok := fields[k]; ok {
			n++
		}
	}
	if len(fields) != n {
		return Checkpoint{}, errors.New("unknown field")
	}
	_, hasKeyID := fields["key_id"]
	var c Checkpoint
	if err := json.Unmarshal(canon, &c); err != nil {
		return Checkpoint{}, fmt.Errorf("bad field: %w", err)
	}
	if c.Seq < 1 || !isHex64(c.Hash) || c.Chain == "" {
		return Checkpoint{}, errors.New("bad chain, seq or hash")
	}
	if _, err := time.Parse(tsLayout, c.TS); err != nil {
		return Checkpoint{}, fmt.Errorf("ts %q is not in the form %s", c.TS, tsLayout)
	}
	if hasKeyID {
		// Written only beside a signature, and only as KeyID makes it: an
		// empty or odd key_id is not something the gateway wrote.
		if len(c.KeyID) != keyIDLen || !isLowerHex(c.KeyID) {
			return Checkpoint{}, fmt.Errorf("key_id %q: want %d lowercase hex digits", c.KeyID, keyIDLen)
		}
		if c.Signature == "" {
			return Checkpoint{}, errors.New("key_id without a signature")
		}
	}
	if err := c.checkTreeFields(); err != nil {
		return Checkpoint{}, err
	}
	// One spelling per checkpoint, as for entries (errNotCanonical): the
	// line must be what line() writes for what was read, so no number or
	// string in it can be re-spelled behind the signature.
	if want := c.line(); !bytes.Equal(line, want[:len(want)-1]) {
		return Checkpoint{}, errors.New("checkpoint is not in canonical form")
	}
	return c, nil
}

// Keygen writes a new ed25519 key pair for signing checkpoints: the private
// key as PKCS#8 PEM ("PRIVATE KEY", mode 0600) and the public key as PKIX
// PEM ("PUBLIC KEY", mode 0644). It refuses to overwrite an existing file,
// so a key that signed checkpoints is never lost by accident.
func Keygen(privPath, pubPath string) error {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("keygen: encode private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return fmt.Errorf("keygen: encode public key: %w", err)
	}
	if err := writeNewFile(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := writeNewFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		_ = os.Remove(privPath) // no half pair left behind
		return fmt.Errorf("keygen: %w", err)
	}
	return nil
}

// writeNewFile writes a file that must not exist yet (a key is never
// overwritten), durably; a partial file is removed.
func writeNewFile(path string, data []byte, mode os.FileMode) error {
	err := writeFileSync(path, data, os.O_EXCL, mode)
	if err != nil && !errors.Is(err, os.ErrExist) {
		_ = os.Remove(path)
	}
	return err
}

// LoadPrivateKey reads an ed25519 private key from a PKCS#8 PEM file.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	return loadKey[ed25519.PrivateKey](path, "PRIVATE KEY", "signing key", x509.ParsePKCS8PrivateKey)
}

// LoadPublicKey reads an ed25519 public key from a PKIX PEM file.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	return loadKey[ed25519.PublicKey](path, "PUBLIC KEY", "public key", x509.ParsePKIXPublicKey)
}

// loadKey reads the PEM block of type typ from path, parses it and takes
// the ed25519 key K from it; what names the key in an error.
func loadKey[K ed25519.PrivateKey | ed25519.PublicKey](path, typ, what string, parse func([]byte) (any, error)) (K, error) {
	der, err := readPEM(path, typ)
	if err != nil {
		return nil, err
	}
	k, err := parse(der)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	key, ok := k.(K)
	if !ok {
		return nil, fmt.Errorf("%s %s: not an ed25519 key", what, path)
	}
	return key, nil
}

func readPEM(path, typ string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != typ {
		return nil, fmt.Errorf("key %s: no PEM block of type %q", path, typ)
	}
	return block.Bytes, nil
}
