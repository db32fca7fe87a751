package compact

import "testing"

// A key that differs from a field only by case is refused: a recipient
// reading case-insensitively would take "G" for the goal the gateway
// checked under "g".
func TestCaseVariantKeysRefused(t *testing.T) {
	l, err := NewLibrary(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{`{"g":"X","G":"Y","plan":[]}`, `{"g":"X","PLAN":[],"plan":[]}`, `{"Msg_Id":"m1","g":"X","plan":[]}`} {
		if r := l.Validate([]byte(raw)); r.Code != CodeMalformedMessage {
			t.Errorf("%s: %+v", raw, r)
		}
	}
}
