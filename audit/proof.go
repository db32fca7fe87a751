package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// InclusionProof proves that one entry is in a chain's Merkle tree at a
// signed checkpoint. Its file is a C2SP transparency log proof
// (c2sp.org/tlog-proof@v1) whose extra data is the entry's line:
//
//	c2sp.org/tlog-proof@v1
//	extra <base64 of the entry line, without its newline>
//	index <leaf index: the entry's seq minus the tree's first seq>
//	<base64 of each proof hash, from the leaf's sibling up>
//	<blank line>
//	<the checkpoint note, verbatim>
type InclusionProof struct {
	Entry      []byte   // the entry line without its newline (the leaf data)
	Index      uint64   // leaf index
	Hashes     [][]byte // RFC 6962 inclusion path
	Checkpoint []byte   // the signed checkpoint note
}

// ConsistencyProof proves that the tree of a later checkpoint extends the
// tree of an earlier one. Its file is JSON (there is no C2SP format for it):
//
//	{"format":"sacpgw.audit/consistency-proof@v1","old":"<note>","new":"<note>","proof":["<base64>",…]}
type ConsistencyProof struct {
	Old, New []byte   // the two checkpoint notes
	Hashes   [][]byte // RFC 6962 consistency proof from Old's size to New's
}

const (
	tlogProofHeader        = "c2sp.org/tlog-proof@v1"
	consistencyProofFormat = "sacpgw.audit/consistency-proof@v1"
	// MaxProofBytes bounds a proof file: an entry line of MaxEntryBytes in
	// base64, 64 hashes and a checkpoint with room for many signatures.
	MaxProofBytes  = MaxEntryBytes*4/3 + 64<<10
	maxProofHashes = 64 // a tree of 2^63 leaves needs 63
)

// Marshal writes p in the tlog-proof format.
func (p InclusionProof) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString(tlogProofHeader + "\n")
	b.WriteString("extra " + base64.StdEncoding.EncodeToString(p.Entry) + "\n")
	b.WriteString("index " + strconv.FormatUint(p.Index, 10) + "\n")
	for _, h := range p.Hashes {
		b.WriteString(base64.StdEncoding.EncodeToString(h) + "\n")
	}
	b.WriteString("\n")
	b.Write(p.Checkpoint)
	return b.Bytes()
}

// ParseInclusionProof reads a tlog-proof file strictly: the header, the
// extra line (required: it is the entry), the index without leading zeros,
// 32-byte hashes in canonical base64, a blank line, and a checkpoint note.
// It checks no signature or hash: VerifyInclusionProof does.
func ParseInclusionProof(data []byte) (InclusionProof, error) {
	if len(data) > MaxProofBytes {
		return InclusionProof{}, fmt.Errorf("proof is larger than %d bytes", MaxProofBytes)
	}
	head, cp, ok := bytes.Cut(data, []byte("\n\n"))
	if !ok {
		return InclusionProof{}, errors.New("proof has no blank line before the checkpoint")
	}
	lines := strings.Split(string(head), "\n")
	if len(lines) < 3 || lines[0] != tlogProofHeader {
		return InclusionProof{}, fmt.Errorf("proof does not start with %q, an extra line and an index line", tlogProofHeader)
	}
	var p InclusionProof
	extra, ok := strings.CutPrefix(lines[1], "extra ")
	if !ok {
		return InclusionProof{}, errors.New("proof has no extra line (the entry)")
	}
	entry, err := strictBase64(extra)
	if err != nil || len(entry) == 0 {
		return InclusionProof{}, errors.New("proof's extra line is not base64 of an entry")
	}
	p.Entry = entry
	idx, ok := strings.CutPrefix(lines[2], "index ")
	if !ok {
		return InclusionProof{}, errors.New("proof has no index line")
	}
	if p.Index, err = strconv.ParseUint(idx, 10, 64); err != nil || strconv.FormatUint(p.Index, 10) != idx {
		return InclusionProof{}, fmt.Errorf("proof index %q is not a decimal without leading zeros", idx)
	}
	if p.Hashes, err = proofHashes(lines[3:]); err != nil {
		return InclusionProof{}, err
	}
	if len(cp) == 0 {
		return InclusionProof{}, errors.New("proof has no checkpoint after the blank line")
	}
	p.Checkpoint = cp
	return p, nil
}

func proofHashes(lines []string) ([][]byte, error) {
	if len(lines) > maxProofHashes {
		return nil, fmt.Errorf("proof has %d hashes, more than a tree can need", len(lines))
	}
	out := make([][]byte, len(lines))
	for i, l := range lines {
		h, err := strictBase64(l)
		if err != nil || len(h) != 32 {
			return nil, fmt.Errorf("proof hash %d is not the base64 of 32 bytes", i+1)
		}
		out[i] = h
	}
	return out, nil
}

// strictBase64 decodes standard padded base64 that re-encodes to itself.
func strictBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || base64.StdEncoding.EncodeToString(b) != s {
		return nil, errors.New("not canonical base64")
	}
	return b, nil
}

type consistencyJSON struct {
	Format string   `json:"format"`
	Old    string   `json:"old"`
	New    string   `json:"new"`
	Proof  []string `json:"proof"`
}

// Marshal writes p as its JSON file, with a final newline.
func (p ConsistencyProof) Marshal() []byte {
	j := consistencyJSON{Format: consistencyProofFormat, Old: string(p.Old), New: string(p.New), Proof: make([]string, len(p.Hashes))}
	for i, h := range p.Hashes {
		j.Proof[i] = base64.StdEncoding.EncodeToString(h)
	}
	b, _ := jsonv2.Marshal(j) // strings only: cannot fail
	return append(b, '\n')
}

// ParseConsistencyProof reads a consistency proof file strictly: exactly
// the four members, once each, and hashes as in an inclusion proof.
func ParseConsistencyProof(data []byte) (ConsistencyProof, error) {
	if len(data) > MaxProofBytes {
		return ConsistencyProof{}, fmt.Errorf("proof is larger than %d bytes", MaxProofBytes)
	}
	var j consistencyJSON
	if err := jsonv2.Unmarshal(data, &j, jsonv2.RejectUnknownMembers(true)); err != nil {
		return ConsistencyProof{}, fmt.Errorf("consistency proof: %w", err)
	}
	if j.Format != consistencyProofFormat {
		return ConsistencyProof{}, fmt.Errorf("consistency proof format %q, want %q", j.Format, consistencyProofFormat)
	}
	if j.Old == "" || j.New == "" || j.Proof == nil {
		return ConsistencyProof{}, errors.New("consistency proof needs old, new and proof")
	}
	hashes, err := proofHashes(j.Proof)
	if err != nil {
		return ConsistencyProof{}, err
	}
	return ConsistencyProof{Old: []byte(j.Old), New: []byte(j.New), Hashes: hashes}, nil
}

// ProofResult is what a verified inclusion proof establishes: the entry is
// leaf Index of the tree of Size leaves that the chain's key signed.
type ProofResult struct {
	Chain string `json:"chain"`
	Entry Entry  `json:"entry"`
	Index uint64 `json:"index"`
	Size  uint64 `json:"tree_size"`
	Root  string `json:"root"` // base64, as in the checkpoint
}

// chainOfOrigin returns the chain a checkpoint origin names.
func chainOfOrigin(origin string) (string, error) {
	chain, ok := strings.CutPrefix(origin, Origin(""))
	if !ok || validChain(chain) != nil {
		return "", fmt.Errorf("checkpoint origin %q is not an audit chain's (%s<chain>)", origin, Origin(""))
	}
	return chain, nil
}

// noteOrigin is the first line of a note, unchecked.
func noteOrigin(msg []byte) string {
	o, _, _ := bytes.Cut(msg, []byte("\n"))
	return string(o)
}

// openCheckpoint checks a checkpoint note under keys and returns its
// chain and tree head.
func openCheckpoint(msg []byte, keys []ed25519.PublicKey) (string, treeHeadNote, error) {
	origin := noteOrigin(msg)
	chain, err := chainOfOrigin(origin)
	if err != nil {
		return "", treeHeadNote{}, err
	}
	if len(keys) == 0 {
		return "", treeHeadNote{}, errors.New("no public key to check the checkpoint with")
	}
	th, err := openNote(msg, origin, keys)
	return chain, th, err
}

// VerifyInclusionProof checks p with only its checkpoint and the public
// keys: the checkpoint's signature under one of keys, the entry line as an
// entry of the checkpoint's chain (its own hash included), and the
// inclusion path from the entry's leaf hash to the signed root.
func VerifyInclusionProof(p InclusionProof, keys []ed25519.PublicKey) (ProofResult, error) {
	chain, th, err := openCheckpoint(p.Checkpoint, keys)
	if err != nil {
		return ProofResult{}, err
	}
	e, err := parseEntry(p.Entry)
	if err != nil {
		return ProofResult{}, fmt.Errorf("the proof's entry: %w", err)
	}
	if e.Chain != chain {
		return ProofResult{}, fmt.Errorf("the proof's entry is of chain %q, the checkpoint of chain %q", e.Chain, chain)
	}
	size := uint64(th.size)
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, p.Index, size, leafHash(p.Entry), p.Hashes, th.root); err != nil {
		return ProofResult{}, fmt.Errorf("entry seq %d is not leaf %d of the checkpoint's tree of size %d: %w", e.Seq, p.Index, size, err)
	}
	return ProofResult{Chain: chain, Entry: e, Index: p.Index, Size: size, Root: base64.StdEncoding.EncodeToString(th.root)}, nil
}

// ConsistencyResult is what a verified consistency proof establishes.
type ConsistencyResult struct {
	Chain   string `json:"chain"`
	OldSize uint64 `json:"old_tree_size"`
	NewSize uint64 `json:"new_tree_size"`
}

// VerifyConsistencyProof checks both checkpoints' signatures under keys,
// that they are of one chain, and that the newer tree extends the older.
func VerifyConsistencyProof(p ConsistencyProof, keys []ed25519.PublicKey) (ConsistencyResult, error) {
	chain, oldTH, err := openCheckpoint(p.Old, keys)
	if err != nil {
		return ConsistencyResult{}, fmt.Errorf("old checkpoint: %w", err)
	}
	newChain, newTH, err := openCheckpoint(p.New, keys)
	if err != nil {
		return ConsistencyResult{}, fmt.Errorf("new checkpoint: %w", err)
	}
	if chain != newChain {
		return ConsistencyResult{}, fmt.Errorf("the checkpoints are of chains %q and %q", chain, newChain)
	}
	s1, s2 := uint64(oldTH.size), uint64(newTH.size)
	if s1 > s2 {
		return ConsistencyResult{}, fmt.Errorf("the old checkpoint's tree (%d) is larger than the new one's (%d)", s1, s2)
	}
	if s1 == 0 && !bytes.Equal(oldTH.root, emptyRoot()) {
		// The library accepts any root for size 0; only the empty tree's is one.
		return ConsistencyResult{}, errors.New("the old checkpoint has tree size 0 but not the empty tree's root")
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, s1, s2, p.Hashes, oldTH.root, newTH.root); err != nil {
		return ConsistencyResult{}, fmt.Errorf("the tree of size %d does not extend the tree of size %d: %w", s2, s1, err)
	}
	return ConsistencyResult{Chain: chain, OldSize: s1, NewSize: s2}, nil
}

// treeCheckpoints returns the chain's checkpoints that carry a tree and
// the tree's first seq (0 when there is none).
func treeCheckpoints(dir string, cf *chainFiles) ([]Checkpoint, int64, error) {
	cps, fail, err := loadCheckpoints(os.DirFS(dir), cf, &keyRing{})
	if err != nil {
		return nil, 0, err
	}
	if fail != nil {
		return nil, 0, fail
	}
	var out []Checkpoint
	for _, c := range cps {
		if c.cp.Merkle != nil {
			out = append(out, c.cp)
		}
	}
	if len(out) == 0 {
		return nil, 0, fmt.Errorf("chain %q has no checkpoint with a Merkle tree yet", cf.chain)
	}
	return out, out[0].Merkle.Start, nil
}

// findChain returns the files of chain in dir; chain "" means the only
// chain there.
func findChain(dir, chain string) (*chainFiles, error) {
	chains, err := scanDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(chains))
	for _, c := range chains {
		if c.chain == chain || (chain == "" && len(chains) == 1) {
			return c, nil
		}
		names = append(names, c.chain)
	}
	if chain == "" {
		return nil, fmt.Errorf("%s holds %d chains (%s): name one", dir, len(chains), strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("%s holds no chain %q", dir, chain)
}

// LatestCheckpointNote returns the signed note of the chain's last
// checkpoint that has one, or of its checkpoint whose tree has size when
// size >= 0.
func LatestCheckpointNote(dir, chain string, size int64) ([]byte, error) {
	cf, err := findChain(dir, chain)
	if err != nil {
		return nil, err
	}
	cps, _, err := treeCheckpoints(dir, cf)
	if err != nil {
		return nil, err
	}
	for i := len(cps) - 1; i >= 0; i-- {
		if cps[i].Note != "" && (size < 0 || cps[i].Merkle.Size == size) {
			return []byte(cps[i].Note), nil
		}
	}
	if size >= 0 {
		return nil, fmt.Errorf("chain %q has no signed checkpoint of tree size %d", cf.chain, size)
	}
	return nil, fmt.Errorf("chain %q has no signed checkpoint with a Merkle tree (is a signing key configured?)", cf.chain)
}

// Prove builds the inclusion proof of the entry of seq in dir against
// checkpoint (a signed note), or against the chain's latest signed
// checkpoint when checkpoint is nil (chain "" then means the only chain).
// It recomputes the tree from the entries and refuses a checkpoint whose
// root is not the trail's.
func Prove(dir, chain string, seq int64, checkpoint []byte) (InclusionProof, error) {
	if checkpoint != nil {
		c, err := chainOfOrigin(noteOrigin(checkpoint))
		if err != nil {
			return InclusionProof{}, err
		}
		chain = c
	}
	cf, err := findChain(dir, chain)
	if err != nil {
		return InclusionProof{}, err
	}
	if checkpoint == nil {
		if checkpoint, err = LatestCheckpointNote(dir, cf.chain, -1); err != nil {
			return InclusionProof{}, err
		}
	}
	th, start, err := noteOfChain(dir, cf, checkpoint)
	if err != nil {
		return InclusionProof{}, err
	}
	if seq < start || seq >= start+th.size {
		return InclusionProof{}, fmt.Errorf("seq %d is not in the checkpoint's tree (seqs %d to %d)", seq, start, start+th.size-1)
	}
	index := uint64(seq - start)
	nodes, err := proof.Inclusion(index, uint64(th.size))
	if err != nil {
		return InclusionProof{}, err
	}
	var entry []byte
	hashes, err := treeNodes(dir, cf, start, th, nodes, nil, func(s int64, line []byte) {
		if s == seq {
			entry = bytes.Clone(line)
		}
	})
	if err != nil {
		return InclusionProof{}, err
	}
	return InclusionProof{Entry: entry, Index: index, Hashes: hashes, Checkpoint: checkpoint}, nil
}

// ProveConsistency builds the proof that the tree of checkpoint newer
// extends the tree of checkpoint older (both signed notes of one chain).
func ProveConsistency(dir string, older, newer []byte) (ConsistencyProof, error) {
	chain, err := chainOfOrigin(noteOrigin(older))
	if err != nil {
		return ConsistencyProof{}, err
	}
	if c, err := chainOfOrigin(noteOrigin(newer)); err != nil || c != chain {
		return ConsistencyProof{}, fmt.Errorf("the checkpoints are not of one chain (%q, %q)", noteOrigin(older), noteOrigin(newer))
	}
	cf, err := findChain(dir, chain)
	if err != nil {
		return ConsistencyProof{}, err
	}
	oldTH, start, err := noteOfChain(dir, cf, older)
	if err != nil {
		return ConsistencyProof{}, fmt.Errorf("old checkpoint: %w", err)
	}
	newTH, _, err := noteOfChain(dir, cf, newer)
	if err != nil {
		return ConsistencyProof{}, fmt.Errorf("new checkpoint: %w", err)
	}
	if oldTH.size > newTH.size {
		return ConsistencyProof{}, fmt.Errorf("the old checkpoint's tree (%d) is larger than the new one's (%d)", oldTH.size, newTH.size)
	}
	nodes, err := proof.Consistency(uint64(oldTH.size), uint64(newTH.size))
	if err != nil {
		return ConsistencyProof{}, err
	}
	hashes, err := treeNodes(dir, cf, start, newTH, nodes, &oldTH, nil)
	if err != nil {
		return ConsistencyProof{}, err
	}
	return ConsistencyProof{Old: older, New: newer, Hashes: hashes}, nil
}

// noteOfChain parses a checkpoint note of cf's chain (its text only: the
// prover needs no key) and returns it with the chain's first tree seq.
func noteOfChain(dir string, cf *chainFiles, msg []byte) (treeHeadNote, int64, error) {
	text, _, err := splitNote(string(msg))
	if err != nil {
		return treeHeadNote{}, 0, err
	}
	th, err := parseNoteBody(text)
	if err != nil {
		return treeHeadNote{}, 0, err
	}
	if th.origin != Origin(cf.chain) {
		return treeHeadNote{}, 0, fmt.Errorf("checkpoint origin %q is not chain %q's", th.origin, cf.chain)
	}
	_, start, err := treeCheckpoints(dir, cf)
	return th, start, err
}

// treeNodes recomputes the chain's tree up to th.size from the entries,
// checks its root against th (and on the way against older, when not nil),
// and returns the proof hashes nodes asks for. each, when not nil, sees
// every entry line on the way.
func treeNodes(dir string, cf *chainFiles, start int64, th treeHeadNote, nodes proof.Nodes, older *treeHeadNote, each func(seq int64, line []byte)) ([][]byte, error) {
	want := make(map[compact.NodeID]int, len(nodes.IDs))
	for i, id := range nodes.IDs {
		want[id] = i
	}
	hashes := make([][]byte, len(nodes.IDs))
	visit := func(id compact.NodeID, h []byte) {
		if i, ok := want[id]; ok {
			hashes[i] = bytes.Clone(h)
		}
	}
	t := newTree(start)
	checkOlder := func() error {
		if older != nil && t.size() == older.size && !bytes.Equal(t.root(), older.root) {
			return fmt.Errorf("the old checkpoint's root for tree size %d is not the root of chain %q's entries: not this trail's checkpoint", older.size, cf.chain)
		}
		return nil
	}
	if err := checkOlder(); err != nil {
		return nil, err
	}
	err := eachEntryLine(dir, cf.segments, start, start+th.size-1, func(seq int64, line []byte) error {
		if each != nil {
			each(seq, line)
		}
		if err := t.rng.Append(leafHash(line), visit); err != nil {
			return err
		}
		return checkOlder()
	})
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(t.root(), th.root) {
		return nil, fmt.Errorf("the checkpoint's root for tree size %d is not the root of chain %q's entries: not this trail's checkpoint", th.size, cf.chain)
	}
	return nodes.Rehash(hashes, nodeHash)
}
