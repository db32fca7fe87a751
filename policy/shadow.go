package policy

import (
	"context"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// shadowTimeout bounds one shadow evaluation: a runaway candidate policy
// must not pile up work behind the live traffic.
const shadowTimeout = time.Second

// shadowJob is a live decision waiting for its shadow evaluation. The input
// value was converted once for the live evaluation and is only read.
type shadowJob struct {
	pt           point
	in           ast.Value
	live         summary
	liveID       string
	liveRevision string
}

// shadowWorker evaluates queued decisions against the shadow policies, one
// at a time, after the live decision was returned: shadow policies never
// affect the live answer or its latency beyond the enqueue.
func (e *Engine) shadowWorker() {
	defer e.wg.Done()
	for {
		select {
		case <-e.done:
			return
		case job := <-e.shadowJobs:
			e.evalShadow(job)
		}
	}
}

func (e *Engine) evalShadow(job shadowJob) {
	p := e.shadow.Load()
	if p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(e.ctx, shadowTimeout)
	out := evalPrepared(ctx, p, job.pt, job.in)
	cancel()
	s := summarize(job.pt, out)
	e.shadowEvals.Add(1)
	if s.key == job.live.key {
		return
	}
	e.shadowDisagreements.Add(1)
	ev := ShadowEvent{
		Point:            pointNames[job.pt],
		Live:             job.live.text,
		Shadow:           s.text,
		LiveDecisionID:   job.liveID,
		ShadowDecisionID: out.id,
		LiveRevision:     job.liveRevision,
		ShadowRevision:   out.revision,
	}
	e.log.Info("shadow policy disagrees", "point", ev.Point, "live", ev.Live, "shadow", ev.Shadow,
		"decision_id", ev.LiveDecisionID, "shadow_decision_id", ev.ShadowDecisionID)
	if e.opts.OnShadowDisagreement != nil {
		e.opts.OnShadowDisagreement(ev)
	}
}
