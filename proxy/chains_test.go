package proxy

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// A chain is the named stages in the order named, without those the
// configuration turned off; a name the set does not know is a wiring
// mistake that New must not build past.
func TestChainByName(t *testing.T) {
	var ran []string
	mark := func(name string) Stage {
		return StageFunc(func(w http.ResponseWriter, r *http.Request, next http.Handler) error {
			ran = append(ran, name)
			next.ServeHTTP(w, r)
			return nil
		})
	}
	st := stageSet{stJournal: mark("journal"), stIdentify: mark("identify"), stModel: mark("model"), stPolicy: nil}
	h := Chain(func(http.ResponseWriter, *http.Request) error { ran = append(ran, "end"); return nil },
		st.chain(stJournal, stIdentify, stPolicy, stModel)...)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil))
	if want := []string{"journal", "identify", "model", "end"}; !slices.Equal(ran, want) {
		t.Errorf("ran %v, want %v", ran, want)
	}

	defer func() {
		if recover() == nil {
			t.Error("a name with no stage built a chain without it")
		}
	}()
	st.chain(stJournal, stRedact)
}
