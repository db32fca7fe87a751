package envelope

import (
	"bytes"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// The issue of one JSON tokenizer for the four hand-written scanners asks
// to choose by measurement. scanJSONText does the envelope scanner's job
// (validate strictly, collect the top-level members and those of the
// second-level objects) with jsontext, for comparison only.
func scanJSONText(raw []byte) ([]member, [numSubs][]member, error) {
	var subs [numSubs][]member
	dec := tokDecoders.Get().(*jsontext.Decoder)
	defer tokDecoders.Put(dec)
	dec.Reset(bytes.NewReader(raw))
	// span returns the bytes of the value just read, as a view of raw.
	span := func(v jsontext.Value) []byte {
		end := int(dec.InputOffset())
		return raw[end-len(v) : end]
	}
	var members func(collect *[]member, nested bool) error
	members = func(collect *[]member, nested bool) error {
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		for dec.PeekKind() != '}' {
			k, err := dec.ReadValue()
			if err != nil {
				return err
			}
			key := span(k)
			if s, ok := subOf(key[1 : len(key)-1]); ok && nested && dec.PeekKind() == '{' {
				start := int(dec.InputOffset())
				if err := members(&subs[s], false); err != nil {
					return err
				}
				*collect = append(*collect, member{key: key[1 : len(key)-1], rawKey: key, val: bytes.TrimLeft(raw[start:dec.InputOffset()], " \t\r\n:")})
				continue
			}
			v, err := dec.ReadValue()
			if err != nil {
				return err
			}
			*collect = append(*collect, member{key: key[1 : len(key)-1], rawKey: key, val: span(v)})
		}
		_, err := dec.ReadToken()
		return err
	}
	top := make([]member, 0, 16)
	if err := members(&top, true); err != nil {
		return nil, subs, err
	}
	return top, subs, nil
}

var tokDecoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

func BenchmarkTokenizer(b *testing.B) {
	for name, in := range map[string]string{"ACL": benchACL, "SAM": benchSAM} {
		raw := []byte(in)
		b.Run(name+"/hand", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				s := scanner{collectSubs: true}
				if _, fe := s.scanObject(raw, 0, ""); fe != nil {
					b.Fatal(fe)
				}
			}
		})
		b.Run(name+"/jsontext", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := scanJSONText(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
