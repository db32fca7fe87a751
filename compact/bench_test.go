package compact

import "testing"

// BenchmarkValidate20Steps validates a realistic message: 20 steps with
// parameters, one parallel group of three followed by a join, typed inputs.
func BenchmarkValidate20Steps(b *testing.B) {
	lib := seedLibrary(b)
	raw := readTestdata(b, "bench_20_steps.json")
	if r := lib.Validate(raw); !r.Valid() {
		b.Fatalf("fixture invalid: %+v", r)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		lib.Validate(raw)
	}
}

func BenchmarkValidateAnswerErr(b *testing.B) {
	lib := seedLibrary(b)
	raw := readTestdata(b, "answers/section8_err.json")
	b.ReportAllocs()
	for b.Loop() {
		lib.ValidateAnswer(raw)
	}
}
