package app

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-µs/op: the process's CPU per iteration (gateway,
// provider and client together: they share the process, and the
// difference between two benchmarks is what the gateway added).
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((cpuTime(b)-start).Microseconds())/float64(b.N), "cpu-µs/op")
}

// benchSteps lifts the caller's step_limit above what a benchmark's
// thousands of runs take.
const benchSteps = "step_limit: 100000000/hour\n"

// BenchmarkWorkflowOneStep is a one-node workflow run end to end: the
// start (body, Rego workflow.allow, workflow.start entry), the step (the
// governed call of the node's agent, in process), the edge, workflow.step
// and workflow.end, and the caller's wait for the end. Compare with
// BenchmarkAgentCallDirect, the same governed call made by the agent: the
// difference is the engine's cost per step.
func BenchmarkWorkflowOneStep(b *testing.B) {
	f := newFlow(b, flowOpts{workflows: benchSteps + pauseFlow})
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		status, body, _ := f.do(http.MethodPost, "/workflows/ask/runs?wait=10s", "tok-starter", `{"input": {"topic": "acme"}}`)
		if status != http.StatusCreated || !strings.Contains(string(body), `"COMPLETED"`) {
			b.Fatalf("%d %s", status, body)
		}
	}
	reportCPU(b, start)
}

// BenchmarkAgentCallDirect is the node's call made by the agent itself with
// the official OpenAI client: the same prompt, protocol, validation and
// audit.
func BenchmarkAgentCallDirect(b *testing.B) {
	f := newFlow(b, flowOpts{workflows: benchSteps + pauseFlow})
	client := openai.NewClient(option.WithBaseURL(f.srv.URL+"/v1"), option.WithAPIKey("tok-researcher"), option.WithMaxRetries(0))
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		resp, err := client.Chat.Completions.New(b.Context(), openai.ChatCompletionNewParams{
			Model:    "model-r",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Research acme")},
		})
		if err != nil || !strings.Contains(resp.Choices[0].Message.Content, `"success"`) {
			b.Fatalf("%v %v", resp, err)
		}
	}
	reportCPU(b, start)
}

// BenchmarkWorkflowTwoSteps is BenchmarkWorkflowOneStep with a second node:
// the difference between the two is what one more step costs, start and
// wait aside.
func BenchmarkWorkflowTwoSteps(b *testing.B) {
	f := newFlow(b, flowOpts{workflows: benchSteps + negotiationFlow})
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		status, body, _ := f.do(http.MethodPost, "/workflows/negotiate/runs?wait=10s", "tok-starter", `{"input": {"topic": "acme"}}`)
		if status != http.StatusCreated || !strings.Contains(string(body), `"COMPLETED"`) {
			b.Fatalf("%d %s", status, body)
		}
	}
	reportCPU(b, start)
}
