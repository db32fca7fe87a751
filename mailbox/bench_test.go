package mailbox

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/sacpgw/gateway/internal/testredis"
)

var benchBody = []byte(`{"message_id":"msg_003","message_type":"notification","sender_id":"executor_1","receiver_id":"orch_1","workflow_id":"wf_12345","action":"task_completed","payload":{"task_id":"task_2","result":"Database updated successfully","affected_records":1}}`)

func benchPushPopAck(b *testing.B, q Queue) {
	ctx := b.Context()
	d := Delivery{MessageID: "msg_003", Sender: "executor_1", Recipient: "orch_1", Priority: 2, Body: benchBody}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Push(ctx, d); err != nil {
			b.Fatal(err)
		}
		got, err := q.Pop(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Ack(ctx, got); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryQueuePushPop(b *testing.B) {
	benchPushPopAck(b, NewMemoryQueue(0))
}

func BenchmarkRedisQueuePushPopAck(b *testing.B) {
	srv := testredis.Start(b) // skips when redis-server is absent
	benchPushPopAck(b, newRedisQueue(b, srv.Client(b), RedisQueueOptions{Prefix: "{bench}"}))
}

func benchAppend(b *testing.B, h History) {
	ctx := b.Context()
	wfs := make([]string, 1000)
	for i := range wfs {
		wfs[i] = fmt.Sprint("wf-", i)
	}
	e := entry("msg_003", "", "corr-1")
	e.Envelope = json.RawMessage(benchBody)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e.WorkflowID = wfs[i%len(wfs)]
		i++
		if err := h.Append(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryHistoryAppend(b *testing.B) {
	benchAppend(b, NewMemoryHistory(HistoryOptions{MaxPerThread: math.MaxInt}))
}

func BenchmarkRedisHistoryAppend(b *testing.B) {
	srv := testredis.Start(b)
	benchAppend(b, NewRedisHistory(srv.Client(b), HistoryOptions{Prefix: "{bench}", MaxPerThread: math.MaxInt32}))
}
