package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
)

// addSeeds adds every fixture and a few near-misses to the corpus.
func addSeeds(f *testing.F) {
	files, err := filepath.Glob("testdata/*/*.json")
	if err != nil || len(files) == 0 {
		f.Fatalf("no fixtures: %v", err)
	}
	for _, name := range files {
		f.Add(readFixture(f, filepath.Join(filepath.Base(filepath.Dir(name)), filepath.Base(name))))
	}
	for _, s := range []string{
		acl(""), sam(""), acl(`,"action":"x"`), acl(`,"metadata":{"timeout_ms":5000,"priority":"low"}`),
		sam(`,"metadata":{"in_reply_to":"m0","timeout_ms":1}`), sam(`,"error":{"code":"C","message":"m","severity":"info"}`),
		acl(`,"timestamp":"2025-11-23T10:00:00.100+05:30"`), sam(`,"timestamp":"0000-01-01T00:30:00+00:00"`),
		`{"sender":{"agent_id":"a"},"sender_id":"a"}`, `{"a":"\ud83d\ude00","a":1}`, `{}`, `[`, "{\"x\":\"\xff\"}",
		`{"message_type":"notification","sender_id":"s","action":"a","receiver_id":null,"receiver_type":"executor"}`,
		`{"sender":{"agent_id":"s"},"recipient":{"agent_id":null,"role":"executor"},"message_type":"EVENT","payload":{"action":"a"}}`,
	} {
		f.Add([]byte(s))
	}
}

// checkDecoded is the property every decoder must have: errors are
// *FieldError; accepted input is valid JSON to encoding/json and survives
// Marshal and Decode unchanged.
func checkDecoded(t *testing.T, in []byte, m *Message, err error) {
	t.Helper()
	if err != nil {
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("error %v (%T) is not a *FieldError", err, err)
		}
		if m != nil {
			t.Fatalf("non-nil message with error %v", err)
		}
		return
	}
	if !json.Valid(in) {
		t.Fatalf("accepted input that encoding/json rejects: %q", in)
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber() // 1e400 is valid JSON but overflows float64
	var generic map[string]any
	if err := dec.Decode(&generic); err != nil {
		t.Fatalf("accepted input encoding/json cannot decode: %v", err)
	}
	out, err := m.Marshal()
	if err != nil {
		t.Fatalf("accepted message does not marshal: %v\ninput %q", err, in)
	}
	if !json.Valid(out) {
		t.Fatalf("Marshal produced invalid JSON: %s", out)
	}
	back, err := Decode(out)
	if err != nil {
		t.Fatalf("Decode(Marshal(m)): %v\ninput %q\noutput %s", err, in, out)
	}
	if !reflect.DeepEqual(back, m) {
		t.Fatalf("round trip differs\n got %#v\nwant %#v\ninput %q\noutput %s", back, m, in, out)
	}
	checkMirrored(t, m)
}

// checkMirrored changes the fields Marshal mirrors into payload and metadata
// and checks they come back, whatever else those objects hold.
func checkMirrored(t *testing.T, m *Message) {
	t.Helper()
	mut := *m
	mut.Priority, mut.TimeoutMS, mut.InReplyTo, mut.Action = Critical, 7, "r-1", "act.x"
	if m.Error != nil {
		e := *m.Error
		e.Code = "CODE_X"
		mut.Error = &e
	}
	out, err := mut.Marshal()
	if err != nil {
		t.Fatalf("mutated message does not marshal: %v", err)
	}
	back, err := Decode(out)
	if err != nil {
		t.Fatalf("Decode(Marshal(mutated)): %v\n%s", err, out)
	}
	if back.Priority != Critical || back.TimeoutMS != 7 || back.InReplyTo != "r-1" || back.Action != "act.x" ||
		(m.Error != nil && back.Error.Code != "CODE_X") {
		t.Fatalf("mirrored fields lost: %+v\n%s", back, out)
	}
	again, err := back.Marshal()
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("Marshal not stable after mutation: %s vs %s (%v)", again, out, err)
	}
}

func FuzzDecode(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := Decode(in)
		checkDecoded(t, in, m, err)
	})
}

func FuzzDecodeACL(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := DecodeACL(in)
		if err == nil && m.Format != ACL {
			t.Fatalf("DecodeACL returned format %q", m.Format)
		}
		checkDecoded(t, in, m, err)
	})
}

func FuzzDecodeSAM(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := DecodeSAM(in)
		if err == nil && m.Format != SAM {
			t.Fatalf("DecodeSAM returned format %q", m.Format)
		}
		checkDecoded(t, in, m, err)
	})
}
