package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// This file is an independent verifier of the gateway's proofs, written
// only from the public texts, as an auditor's own tool would be: the proof
// file from c2sp.org/tlog-proof, the checkpoint from c2sp.org/tlog-checkpoint
// and c2sp.org/signed-note (Ed25519, key id 0x01), the hashes from RFC 6962
// section 2.1, and the verification algorithms of RFC 9162 sections
// 2.1.3.2 and 2.1.4.2. It uses neither the package's code nor the
// transparency-dev or x/mod modules the package uses.

func rfcLeaf(data []byte) []byte {
	h := sha256.Sum256(append([]byte{0x00}, data...))
	return h[:]
}

func rfcNode(l, r []byte) []byte {
	h := sha256.New()
	h.Write([]byte{0x01})
	h.Write(l)
	h.Write(r)
	return h.Sum(nil)
}

// rfcMTH is the Merkle Tree Hash of RFC 6962 section 2.1, recursively:
// MTH({}) = SHA-256(), MTH({d0}) = leaf, MTH(D[n]) = node(MTH(D[0:k]),
// MTH(D[k:n])) for the largest power of two k < n.
func rfcMTH(leaves [][]byte) []byte {
	switch n := len(leaves); n {
	case 0:
		h := sha256.Sum256(nil)
		return h[:]
	case 1:
		return rfcLeaf(leaves[0])
	default:
		k := 1
		for k*2 < n {
			k *= 2
		}
		return rfcNode(rfcMTH(leaves[:k]), rfcMTH(leaves[k:]))
	}
}

// rfcVerifyInclusion is RFC 9162 section 2.1.3.2.
func rfcVerifyInclusion(index, size uint64, leafHash []byte, path [][]byte, root []byte) bool {
	if index >= size {
		return false
	}
	fn, sn := index, size-1
	r := leafHash
	for _, p := range path {
		if sn == 0 {
			return false
		}
		if fn&1 == 1 || fn == sn {
			r = rfcNode(p, r)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			r = rfcNode(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	return sn == 0 && bytes.Equal(r, root)
}

// rfcVerifyConsistency is RFC 9162 section 2.1.4.2, for 0 < first < second
// (equal sizes need equal roots and an empty proof).
func rfcVerifyConsistency(first, second uint64, firstHash, secondHash []byte, path [][]byte) bool {
	if first == second {
		return len(path) == 0 && bytes.Equal(firstHash, secondHash)
	}
	if first == 0 || first > second || len(path) == 0 {
		return false
	}
	if first&(first-1) == 0 {
		path = append([][]byte{firstHash}, path...)
	}
	fn, sn := first-1, second-1
	for fn&1 == 1 {
		fn >>= 1
		sn >>= 1
	}
	fr, sr := path[0], path[0]
	for _, c := range path[1:] {
		if sn == 0 {
			return false
		}
		if fn&1 == 1 || fn == sn {
			fr = rfcNode(c, fr)
			sr = rfcNode(c, sr)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			sr = rfcNode(sr, c)
		}
		fn >>= 1
		sn >>= 1
	}
	return bytes.Equal(fr, firstHash) && bytes.Equal(sr, secondHash) && sn == 0
}

// rfcCheckpoint is a checkpoint note whose Ed25519 signature by the key
// named origin verified.
type rfcCheckpoint struct {
	origin string
	size   uint64
	root   []byte
}

// rfcOpenCheckpoint checks a signed note (text, blank line, lines "— name
// base64(keyhash(4) || signature)") for a signature of pub under the name
// that is the note's origin, and parses the checkpoint text.
func rfcOpenCheckpoint(note []byte, pub ed25519.PublicKey) (rfcCheckpoint, error) {
	i := bytes.LastIndex(note, []byte("\n\n"))
	if i < 0 {
		return rfcCheckpoint{}, errors.New("no signature block")
	}
	text, sigs := note[:i+1], string(note[i+2:])
	lines := strings.Split(string(text), "\n")
	if len(lines) < 4 {
		return rfcCheckpoint{}, errors.New("checkpoint text too short")
	}
	origin := lines[0]
	// key hash: the first 4 bytes of SHA-256(name || 0x0A || 0x01 || key)
	kh := sha256.Sum256(append(append([]byte(origin+"\n"), 0x01), pub...))
	verified := false
	for _, l := range strings.Split(strings.TrimSuffix(sigs, "\n"), "\n") {
		rest, ok := strings.CutPrefix(l, "— "+origin+" ")
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(rest)
		if err != nil || len(raw) != 4+ed25519.SignatureSize || !bytes.Equal(raw[:4], kh[:4]) {
			continue
		}
		if !ed25519.Verify(pub, text, raw[4:]) {
			return rfcCheckpoint{}, errors.New("bad signature")
		}
		verified = true
	}
	if !verified {
		return rfcCheckpoint{}, errors.New("no signature by the key")
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil {
		return rfcCheckpoint{}, fmt.Errorf("size: %w", err)
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != 32 {
		return rfcCheckpoint{}, errors.New("root")
	}
	return rfcCheckpoint{origin: origin, size: size, root: root}, nil
}

// rfcCheckProofFile verifies a tlog-proof file under pub and returns the
// entry (the extra data) it proves and the leaf index.
func rfcCheckProofFile(file []byte, pub ed25519.PublicKey) ([]byte, uint64, error) {
	head, note, ok := bytes.Cut(file, []byte("\n\n"))
	if !ok {
		return nil, 0, errors.New("no blank line")
	}
	lines := strings.Split(string(head), "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" {
		return nil, 0, errors.New("header")
	}
	lines = lines[1:]
	var extra []byte
	if e, ok := strings.CutPrefix(lines[0], "extra "); ok {
		var err error
		if extra, err = base64.StdEncoding.DecodeString(e); err != nil {
			return nil, 0, err
		}
		lines = lines[1:]
	}
	idx, ok := strings.CutPrefix(lines[0], "index ")
	if !ok {
		return nil, 0, errors.New("index line")
	}
	index, err := strconv.ParseUint(idx, 10, 64)
	if err != nil {
		return nil, 0, err
	}
	var path [][]byte
	for _, l := range lines[1:] {
		h, err := base64.StdEncoding.DecodeString(l)
		if err != nil || len(h) != 32 {
			return nil, 0, errors.New("path hash")
		}
		path = append(path, h)
	}
	cp, err := rfcOpenCheckpoint(note, pub)
	if err != nil {
		return nil, 0, err
	}
	if !rfcVerifyInclusion(index, cp.size, rfcLeaf(extra), path, cp.root) {
		return nil, 0, errors.New("inclusion proof does not verify")
	}
	return extra, index, nil
}
