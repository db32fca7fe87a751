package audit

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
)

// treeCheck recomputes a chain's Merkle tree while Verify reads its
// entries and holds each checkpoint's tree to it.
type treeCheck struct {
	t *tree // nil: no tree, or none that this verify can check
}

// newTreeCheck starts the check for a chain whose checkpoints are cps,
// verified from the checkpoint from (nil: from seq 1). Every checkpoint
// with a tree must name the same first seq; the first of them marks it.
func newTreeCheck(cps []cpLine, from *Checkpoint) (*treeCheck, *cpLine, error) {
	var first *cpLine
	for i, c := range cps {
		if c.cp.Merkle == nil {
			continue
		}
		if first == nil {
			first = &cps[i]
		} else if c.cp.Merkle.Start != first.cp.Merkle.Start {
			return nil, &cps[i], fmt.Errorf("tree starts at seq %d, but the checkpoint on line %d that marks its start says seq %d",
				c.cp.Merkle.Start, first.line, first.cp.Merkle.Start)
		}
	}
	switch {
	case first == nil:
		return &treeCheck{}, nil, nil
	case from == nil || from.Seq < first.cp.Merkle.Start:
		return &treeCheck{t: newTree(first.cp.Merkle.Start)}, nil, nil
	case from.Merkle != nil:
		t, err := treeOf(*from.Merkle) // parseCheckpoint checked it
		return &treeCheck{t: t}, nil, err
	}
	return &treeCheck{}, nil, nil // the window starts inside the tree at a checkpoint without one
}

// add takes the entry of seq, whose line is line; entries before the tree,
// or already in the range verify started from, are skipped.
func (c *treeCheck) add(seq int64, line []byte) {
	if c.t != nil && seq == c.t.start+c.t.size() {
		c.t.add(leafHash(line))
	}
}

// check reports why cp's tree is not the tree of the entries so far.
func (c *treeCheck) check(cp Checkpoint) error {
	if c.t == nil || cp.Merkle == nil {
		return nil
	}
	if c.t.size() != cp.Merkle.Size || !slices.Equal(c.t.head().Range, cp.Merkle.Range) {
		return fmt.Errorf("checkpoint's Merkle tree (size %d) is not the tree of the entries from seq %d", cp.Merkle.Size, cp.Merkle.Start)
	}
	return nil
}

// checkNote reports why the signed checkpoint c, if it has a tree, has no
// note whose signature verifies under the key its key id names.
func (r *keyRing) checkNote(c Checkpoint) error {
	if c.Merkle == nil {
		return nil
	}
	if c.Note == "" {
		return errors.New("signed checkpoint with a Merkle tree has no signed note")
	}
	keys := make([]ed25519.PublicKey, 0, len(r.ids))
	for _, id := range r.ids {
		if c.KeyID == "" || id == c.KeyID {
			keys = append(keys, r.byID[id])
		}
	}
	if _, err := openNote([]byte(c.Note), Origin(c.Chain), keys); err != nil {
		return fmt.Errorf("note: %w", err)
	}
	return nil
}
