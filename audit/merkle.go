package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/note"
)

// Each chain also keeps a Merkle tree over its entries, hashed as RFC 6962
// and RFC 9162 say, so that one entry can be proved against a signed
// checkpoint with a logarithmic proof instead of the whole chain:
//
//	leaf i = SHA-256(0x00 || line)     line: entry seq start+i as written, without its newline
//	node   = SHA-256(0x01 || left || right)
//
// The leaf is the line as written because every line is the one canonical
// spelling of its entry (parseEntry refuses any other), it carries the seq,
// chain, prev_hash and hash, and a third party holding an exported line can
// hash it as it is, without re-canonicalizing JSON.
//
// The tree starts at a marked checkpoint: seq 1 for a chain that starts
// with it, else the first checkpoint carrying a tree, written at Open with
// size 0 at the chain's last entry, so entries before it verify by the hash
// chain as they always did. Only the compact range (at most 64 hashes) is
// kept in each checkpoint; Open replays the entries after the last one.

// leafHash is the RFC 6962 leaf hash of an entry line without its newline.
func leafHash(line []byte) []byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(line)
	return h.Sum(nil)
}

// nodeHash is the RFC 6962 hash of an interior node.
func nodeHash(left, right []byte) []byte {
	h := sha256.New()
	h.Write([]byte{1})
	h.Write(left)
	h.Write(right)
	return h.Sum(nil)
}

// emptyRoot is the root of the tree of size 0: SHA-256 of nothing.
func emptyRoot() []byte {
	s := sha256.Sum256(nil)
	return s[:]
}

var treeFactory = &compact.RangeFactory{Hash: nodeHash}

// TreeHead is the Merkle tree of a chain at a checkpoint: leaf 0 is the
// entry of seq Start, Size leaves, so the checkpoint's seq is Start+Size-1
// (Start-1 for the marked checkpoint of size 0). Range is the compact range
// of the tree (the roots of its perfect subtrees, left to right, as
// lowercase hex), from which the root is computed and the tree grows.
type TreeHead struct {
	Range []string `json:"range"`
	Size  int64    `json:"size"`
	Start int64    `json:"start"`
}

// tree is a chain's Merkle tree as the writer keeps it.
type tree struct {
	start int64
	rng   *compact.Range
}

func newTree(start int64) *tree {
	return &tree{start: start, rng: treeFactory.NewEmptyRange(0)}
}

// treeOf rebuilds the tree a checkpoint's TreeHead describes.
func treeOf(h TreeHead) (*tree, error) {
	if h.Start < 1 || h.Size < 0 {
		return nil, fmt.Errorf("tree start %d, size %d", h.Start, h.Size)
	}
	hashes := make([][]byte, len(h.Range))
	for i, s := range h.Range {
		if !isHex64(s) {
			return nil, fmt.Errorf("tree range hash %d is not 64 lowercase hex digits", i+1)
		}
		hashes[i], _ = hex.DecodeString(s)
	}
	rng, err := treeFactory.NewRange(0, uint64(h.Size), hashes)
	if err != nil {
		return nil, fmt.Errorf("tree range: %w", err)
	}
	return &tree{start: h.Start, rng: rng}, nil
}

func (t *tree) size() int64 { return int64(t.rng.End()) }

// add appends the leaf hash of the entry of seq start+size.
func (t *tree) add(leaf []byte) {
	// Append fails only on a range that is not one; ours is built by Append.
	_ = t.rng.Append(leaf, nil)
}

func (t *tree) root() []byte {
	r, _ := t.rng.GetRootHash(nil) // begins at 0, so it cannot fail
	if r == nil {
		return emptyRoot()
	}
	return r
}

func (t *tree) head() TreeHead {
	hs := t.rng.Hashes()
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = hex.EncodeToString(h)
	}
	return TreeHead{Range: out, Size: t.size(), Start: t.start}
}

// Origin is the origin line of a chain's checkpoint notes, and the name of
// the key in their signature lines.
func Origin(chain string) string { return "sacpgw.audit/" + chain }

// noteBody is the text of a C2SP checkpoint (c2sp.org/tlog-checkpoint):
// origin, tree size, base64 root, each on its own line.
func noteBody(origin string, size int64, root []byte) string {
	return origin + "\n" + strconv.FormatInt(size, 10) + "\n" + base64.StdEncoding.EncodeToString(root) + "\n"
}

// noteSigner signs checkpoint notes with the chain's ed25519 key, as a
// signed-note key of type 0x01 named after the origin.
type noteSigner struct {
	name string
	hash uint32
	key  ed25519.PrivateKey
}

func newNoteSigner(origin string, key ed25519.PrivateKey) (*noteSigner, error) {
	v, err := noteVerifier(origin, key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	return &noteSigner{name: origin, hash: v.KeyHash(), key: key}, nil
}

func (s *noteSigner) Name() string                    { return s.name }
func (s *noteSigner) KeyHash() uint32                 { return s.hash }
func (s *noteSigner) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.key, msg), nil }

// noteVerifier is the signed-note verifier of pub for checkpoints of origin.
func noteVerifier(origin string, pub ed25519.PublicKey) (note.Verifier, error) {
	vkey, err := note.NewEd25519VerifierKey(origin, pub)
	if err != nil {
		return nil, fmt.Errorf("note key for %q: %w", origin, err)
	}
	return note.NewVerifier(vkey)
}

// VerifierKey is the signed-note verifier key ("name+hash+key") of a
// checkpoint signing key for a chain, what C2SP-aware tools take instead of
// the PEM file.
func VerifierKey(chain string, pub ed25519.PublicKey) (string, error) {
	return note.NewEd25519VerifierKey(Origin(chain), pub)
}

// treeHeadNote is a checkpoint's tree as a C2SP checkpoint, parsed.
type treeHeadNote struct {
	origin string
	size   int64
	root   []byte
}

// parseNoteBody parses the text of a checkpoint note strictly: origin,
// size without leading zeros, a base64 SHA-256 root, and no extension
// lines (the gateway writes none, and a proof acts on nothing it did not
// check).
func parseNoteBody(text string) (treeHeadNote, error) {
	lines := strings.Split(text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		return treeHeadNote{}, errors.New("checkpoint text is not three lines (origin, size, root)")
	}
	origin, sizeS, rootS := lines[0], lines[1], lines[2]
	if origin == "" {
		return treeHeadNote{}, errors.New("checkpoint origin is empty")
	}
	size, err := strconv.ParseInt(sizeS, 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != sizeS {
		return treeHeadNote{}, fmt.Errorf("checkpoint tree size %q is not a decimal without leading zeros", sizeS)
	}
	root, err := base64.StdEncoding.Strict().DecodeString(rootS)
	if err != nil || len(root) != sha256.Size || base64.StdEncoding.EncodeToString(root) != rootS {
		return treeHeadNote{}, errors.New("checkpoint root is not the base64 of 32 bytes")
	}
	return treeHeadNote{origin: origin, size: size, root: root}, nil
}

// splitNote splits a signed note into its text (ending in a newline) and
// its signature block, without checking a signature.
func splitNote(msg string) (text, sigs string, err error) {
	i := strings.LastIndex(msg, "\n\n")
	if i < 0 || !strings.HasSuffix(msg, "\n") || i+2 >= len(msg) {
		return "", "", errors.New("not a signed note (text, blank line, signature lines)")
	}
	return msg[:i+1], msg[i+2:], nil
}

// checkTreeFields checks what parseCheckpoint reads of a checkpoint's tree:
// sizes that add up, a range of the right length, and a note (the gateway
// writes one beside each signature) whose text is this chain's origin, this
// size and the root of this range. The note's signature is checked, and
// required on signed checkpoints, by Verify under the keys it is given.
func (c Checkpoint) checkTreeFields() error {
	if c.Merkle == nil {
		if c.Note != "" {
			return errors.New("note without a tree")
		}
		return nil
	}
	h := *c.Merkle
	if h.Start < 1 || h.Size < 0 || h.Start+h.Size-1 != c.Seq {
		return fmt.Errorf("tree start %d and size %d do not end at seq %d", h.Start, h.Size, c.Seq)
	}
	t, err := treeOf(h)
	if err != nil {
		return err
	}
	if c.Note == "" {
		return nil
	}
	text, _, err := splitNote(c.Note)
	if err != nil {
		return err
	}
	if text != noteBody(Origin(c.Chain), h.Size, t.root()) {
		return errors.New("note is not the checkpoint of this chain's tree (origin, size and root)")
	}
	return nil
}

// openNote checks a checkpoint note's signature under any of keys (by its
// key name origin) and returns its parsed text.
func openNote(msg []byte, origin string, keys []ed25519.PublicKey) (treeHeadNote, error) {
	vs := make([]note.Verifier, 0, len(keys))
	for _, k := range keys {
		v, err := noteVerifier(origin, k)
		if err != nil {
			return treeHeadNote{}, err
		}
		vs = append(vs, v)
	}
	n, err := note.Open(msg, note.VerifierList(vs...))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		if errors.As(err, &unverified) {
			return treeHeadNote{}, fmt.Errorf("checkpoint has no signature by the key(s) given for %q", origin)
		}
		return treeHeadNote{}, fmt.Errorf("checkpoint signature: %w", err)
	}
	th, err := parseNoteBody(n.Text)
	if err != nil {
		return treeHeadNote{}, err
	}
	if th.origin != origin {
		return treeHeadNote{}, fmt.Errorf("checkpoint origin %q, want %q", th.origin, origin)
	}
	return th, nil
}

// withTree adds the tree and, with a signing key, its signed note to a
// checkpoint of the chain's last entry.
func (l *Log) withTree(cp Checkpoint) Checkpoint {
	h := l.tree.head()
	cp.Merkle = &h
	if l.noteKey != nil {
		// Sign fails only for an invalid key name, and Origin's is valid.
		msg, err := note.Sign(&note.Note{Text: noteBody(Origin(l.chain), h.Size, l.tree.root())}, l.noteKey)
		if err == nil {
			cp.Note = string(msg)
		}
	}
	return cp
}

// appendCanonical appends h as RFC 8785 JSON.
func (h TreeHead) appendCanonical(b []byte) []byte {
	b = append(b, `{"range":[`...)
	for i, s := range h.Range {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendCanonicalString(b, s)
	}
	b = append(b, `],"size":`...)
	b = strconv.AppendInt(b, h.Size, 10)
	b = append(b, `,"start":`...)
	b = strconv.AppendInt(b, h.Start, 10)
	return append(b, '}')
}
