package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/policy"
)

// maxStream bounds one stream from an agent (SendStreamingMessage,
// SubscribeToTask); a unary call is bounded by protocol timeouts.response.
const maxStream = 30 * time.Minute

// Ownership kinds.
const (
	ownTask    = "task"
	ownContext = "context"
)

// call is one request to /a2a/{agent} on its way through the door, on the
// context the SDK's JSON-RPC handler passes to the handler.
type call struct {
	ex      *scope.Exchange
	caller  *roster.Agent
	target  *roster.Agent
	conf    *conf
	card    *cardState
	rpc     *rpcCall
	payload string // sha256 of the request body
	size    int    // the request body's length
	base    string // the gateway's external URL
	up      a2aclient.Transport
}

type callKey struct{}

func callOf(ctx context.Context) *call { return ctx.Value(callKey{}).(*call) }

// serveRPC serves POST /a2a/{agent}: the body read once within the
// caller's max_request_size and checked strictly, the agent's card at
// hand, then the SDK's JSON-RPC binding on the very bytes checked, with
// the governed handler behind it.
func (d *Door) serveRPC(w http.ResponseWriter, r *http.Request) {
	c := d.conf.Load()
	ex := scope.Get(r.Context())
	target := c.target(r)
	if target == nil {
		httpx.Fail(w, r, notFound(r.PathValue("agent")))
		return
	}
	body, err := httpx.ReadLimited(r, int64(ex.Agent.MaxRequestSize))
	if err != nil {
		httpx.Fail(w, r, err)
		return
	}
	cl := &call{ex: ex, caller: ex.Agent, target: target, conf: c, payload: sha256Hex(body), size: len(body), base: c.gatewayURL(r)}
	rc, rerr := readCall(body, r.Header.Get(sdk.SvcParamVersion))
	if rerr != nil {
		d.reject(r.Context(), cl, "", rerr)
		writeRPCError(w, rerr)
		return
	}
	cl.rpc = rc
	if cl.card, err = d.cards.get(r.Context(), target); err != nil {
		e := &rpcError{code: -32603, msg: "The agent's card could not be read: the agent is unavailable.", id: rc.id}
		d.reject(r.Context(), cl, rc.method, e)
		writeRPCError(w, e)
		return
	}
	cl.up = a2aclient.NewJSONRPCTransport(cl.card.endpoint, d.client)
	next := r.WithContext(context.WithValue(r.Context(), callKey{}, cl))
	next.Body = io.NopCloser(bytes.NewReader(body))
	d.rpc.ServeHTTP(w, next)
}

// writeRPCError answers a refusal of the reader in JSON-RPC's shape (HTTP
// 200, as the binding answers every error it knows).
func writeRPCError(w http.ResponseWriter, e *rpcError) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": e.id, "error": map[string]any{"code": e.code, "message": e.msg}})
}

func notFound(agent string) error {
	return &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "recipient_not_found",
		Message: fmt.Sprintf("No A2A agent %q is served here.", clip(agent))}
}

func unavailable() error {
	return apierror.Upstream(http.StatusBadGateway, "The agent's card could not be read: the agent is unavailable.", errCardUnavailable)
}

// handler is the SDK's RequestHandler: each method governs the call and
// relays it to the agent.
type handler struct{ d *Door }

// params are the service parameters the gateway sends the agent: the
// protocol version, nothing of the caller's.
func params() a2aclient.ServiceParams {
	return a2aclient.ServiceParams{sdk.SvcParamVersion: {string(Version)}}
}

// SendMessage governs a message and relays it; the answer (a task or a
// message) is owned by the caller, redacted and audited.
func (h *handler) SendMessage(ctx context.Context, req *sdk.SendMessageRequest) (sdk.SendMessageResult, error) {
	ev, err := h.d.unary(ctx, func(cl *call) error { return h.d.govern(ctx, cl, req) },
		func(ctx context.Context, cl *call) (sdk.Event, error) {
			res, err := cl.up.SendMessage(ctx, params(), req)
			ev, _ := res.(sdk.Event) // nil for none: answer withholds it
			return ev, err
		})
	if err != nil {
		return nil, err
	}
	res, _ := ev.(sdk.SendMessageResult)
	return res, nil
}

// SendStreamingMessage governs a message and relays the agent's events,
// each owned, redacted and audited as it passes.
func (h *handler) SendStreamingMessage(ctx context.Context, req *sdk.SendMessageRequest) iter.Seq2[sdk.Event, error] {
	return h.d.stream(ctx, func(cl *call) error { return h.d.govern(ctx, cl, req) },
		func(ctx context.Context, cl *call) iter.Seq2[sdk.Event, error] {
			return cl.up.SendStreamingMessage(ctx, params(), req)
		})
}

// GetTask relays a read of a task the caller owns.
func (h *handler) GetTask(ctx context.Context, req *sdk.GetTaskRequest) (*sdk.Task, error) {
	return h.d.taskUnary(ctx, string(req.ID), func(ctx context.Context, cl *call) (*sdk.Task, error) {
		return cl.up.GetTask(ctx, params(), req)
	})
}

// ListTasks lists the caller's own tasks at the agent, each read from the
// agent (an agent's own listing would show every caller's, or, as the
// SDK's, only those of the user the gateway would have to be). The page
// token is the position in the caller's list.
func (h *handler) ListTasks(ctx context.Context, req *sdk.ListTasksRequest) (*sdk.ListTasksResponse, error) {
	cl := callOf(ctx)
	if err := h.d.record(ctx, cl, KindRequest, h.d.requestSummary(cl, nil)); err != nil {
		return nil, err
	}
	ids := h.d.owners.list(ownTask, cl.target.ID, cl.caller.ID)
	start, size := 0, req.PageSize
	if req.PageToken != "" {
		n, err := strconv.Atoi(req.PageToken)
		if err != nil || n < 0 || n > len(ids) {
			return nil, sdk.NewError(sdk.ErrInvalidParams, "pageToken is not one this gateway gave.")
		}
		start = n
	}
	if size <= 0 || size > maxPage {
		size = maxPage
	}
	ctx, cancel := context.WithTimeout(ctx, cl.conf.timeout)
	defer cancel()
	out := &sdk.ListTasksResponse{Tasks: []*sdk.Task{}}
	i := start
	for ; i < len(ids) && len(out.Tasks) < size; i++ {
		t, err := cl.up.GetTask(ctx, params(), &sdk.GetTaskRequest{ID: sdk.TaskID(ids[i]), HistoryLength: req.HistoryLength})
		if errors.Is(err, sdk.ErrTaskNotFound) {
			continue // the agent forgot it
		}
		if err != nil {
			return nil, h.d.upstreamError(ctx, cl, err)
		}
		if (req.ContextID != "" && t.ContextID != req.ContextID) || (req.Status != "" && t.Status.State != req.Status) {
			continue
		}
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		if err := h.d.answer(ctx, cl, t); err != nil {
			return nil, err
		}
		out.Tasks = append(out.Tasks, t)
	}
	if i < len(ids) {
		out.NextPageToken = strconv.Itoa(i)
	}
	out.PageSize, out.TotalSize = size, len(out.Tasks)
	return out, nil
}

// maxPage bounds the tasks of one ListTasks answer.
const maxPage = 50

// CancelTask relays the cancel of a task the caller owns.
func (h *handler) CancelTask(ctx context.Context, req *sdk.CancelTaskRequest) (*sdk.Task, error) {
	return h.d.taskUnary(ctx, string(req.ID), func(ctx context.Context, cl *call) (*sdk.Task, error) {
		return cl.up.CancelTask(ctx, params(), req)
	})
}

// SubscribeToTask relays the events of a task the caller owns.
func (h *handler) SubscribeToTask(ctx context.Context, req *sdk.SubscribeToTaskRequest) iter.Seq2[sdk.Event, error] {
	return h.d.stream(ctx, func(cl *call) error { return h.d.taskCall(ctx, cl, string(req.ID)) },
		func(ctx context.Context, cl *call) iter.Seq2[sdk.Event, error] {
			return cl.up.SubscribeToTask(ctx, params(), req)
		})
}

// unary admits a call, makes it to the agent within protocol
// timeouts.response, and answers with what the agent sent.
func (d *Door) unary(ctx context.Context, admit func(*call) error, do func(context.Context, *call) (sdk.Event, error)) (sdk.Event, error) {
	cl := callOf(ctx)
	if err := admit(cl); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cl.conf.timeout)
	defer cancel()
	ev, err := do(ctx, cl)
	if err != nil {
		return nil, d.upstreamError(ctx, cl, err)
	}
	if err := d.answer(ctx, cl, ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// taskUnary is unary for a call on a task the caller owns.
func (d *Door) taskUnary(ctx context.Context, taskID string, do func(context.Context, *call) (*sdk.Task, error)) (*sdk.Task, error) {
	ev, err := d.unary(ctx, func(cl *call) error { return d.taskCall(ctx, cl, taskID) },
		func(ctx context.Context, cl *call) (sdk.Event, error) {
			t, err := do(ctx, cl)
			if t == nil {
				return nil, err // a nil task is no event: answer withholds it
			}
			return t, err
		})
	if err != nil {
		return nil, err
	}
	return ev.(*sdk.Task), nil
}

// stream admits a call and relays the events of the stream open starts,
// within maxStream.
func (d *Door) stream(ctx context.Context, admit func(*call) error, open func(context.Context, *call) iter.Seq2[sdk.Event, error]) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		cl := callOf(ctx)
		if err := admit(cl); err != nil {
			yield(nil, err)
			return
		}
		ctx, cancel := context.WithTimeout(ctx, maxStream)
		defer cancel()
		d.relayStream(ctx, cl, open(ctx, cl), yield)
	}
}

// errPush refuses push notification configs by name.
func (h *handler) errPush(ctx context.Context) error {
	e := sdk.NewError(sdk.ErrPushNotificationNotSupported, "Push notifications are not served by this gateway: it does not call addresses an agent gives it. "+
		"Use SendStreamingMessage or SubscribeToTask for a task's events.")
	h.d.reject(ctx, callOf(ctx), callOf(ctx).rpc.method, e)
	return e
}

func (h *handler) GetTaskPushConfig(ctx context.Context, _ *sdk.GetTaskPushConfigRequest) (*sdk.TaskPushConfig, error) {
	return nil, h.errPush(ctx)
}

func (h *handler) ListTaskPushConfigs(ctx context.Context, _ *sdk.ListTaskPushConfigRequest) ([]*sdk.TaskPushConfig, error) {
	return nil, h.errPush(ctx)
}

func (h *handler) CreateTaskPushConfig(ctx context.Context, _ *sdk.CreateTaskPushConfigRequest) (*sdk.TaskPushConfig, error) {
	return nil, h.errPush(ctx)
}

func (h *handler) DeleteTaskPushConfig(ctx context.Context, _ *sdk.DeleteTaskPushConfigRequest) error {
	return h.errPush(ctx)
}

// GetExtendedAgentCard is refused: the card at
// /a2a/{agent}/.well-known/agent-card.json is the only one.
func (h *handler) GetExtendedAgentCard(ctx context.Context, _ *sdk.GetExtendedAgentCardRequest) (*sdk.AgentCard, error) {
	e := sdk.NewError(sdk.ErrExtendedCardNotConfigured, "This gateway serves no extended card: the card at .well-known/agent-card.json is the only one.")
	h.d.reject(ctx, callOf(ctx), callOf(ctx).rpc.method, e)
	return nil, e
}

// taskCall admits a call on a task the caller owns (another's, or one
// never seen, is not found) and audits it.
func (d *Door) taskCall(ctx context.Context, cl *call, taskID string) error {
	if !d.owners.owns(ownTask, cl.target.ID, taskID, cl.caller.ID) {
		e := sdk.NewError(sdk.ErrTaskNotFound, fmt.Sprintf("Task %q was not found.", clip(taskID)))
		d.reject(ctx, cl, cl.rpc.method, e)
		return e
	}
	return d.record(ctx, cl, KindRequest, d.requestSummary(cl, nil))
}

// govern runs the checks of a message before it is relayed, in order:
// skill, the task and context it continues, RBAC, the policy, redaction;
// then the message.request entry. A refusal is audited as message.reject
// and answered in A2A's error shape.
func (d *Door) govern(ctx context.Context, cl *call, req *sdk.SendMessageRequest) error {
	err := d.checkMessage(ctx, cl, req)
	if err != nil {
		d.reject(ctx, cl, cl.rpc.method, err)
		return err
	}
	return nil
}

func (d *Door) checkMessage(ctx context.Context, cl *call, req *sdk.SendMessageRequest) error {
	m := req.Message
	skill := cl.rpc.skill
	if skill != "" && !slices.ContainsFunc(cl.card.card.Skills, func(s sdk.AgentSkill) bool { return s.ID == skill }) {
		return sdk.NewError(sdk.ErrInvalidParams, fmt.Sprintf("Agent %q has no skill %q.", cl.target.ID, clip(skill)))
	}
	if !d.owners.owns(ownTask, cl.target.ID, string(m.TaskID), cl.caller.ID) && m.TaskID != "" {
		return sdk.NewError(sdk.ErrTaskNotFound, fmt.Sprintf("Task %q was not found.", clip(string(m.TaskID))))
	}
	if id := d.waiting.get(cl.target.ID, string(m.TaskID)); id != "" && m.TaskID != "" {
		return sdk.NewError(sdk.ErrUnsupportedOperation, fmt.Sprintf("Task %q waits for a person's answer (review %s): it takes no other message until then.", clip(string(m.TaskID)), id))
	}
	if !d.owners.free(ownContext, cl.target.ID, m.ContextID, cl.caller.ID) {
		return sdk.NewError(sdk.ErrInvalidParams, fmt.Sprintf("Context %q belongs to another caller.", clip(m.ContextID)))
	}
	act := action(skill)
	az := cl.conf.rbac.AuthorizeMessage(cl.caller.ID, cl.target.ID, act)
	if !az.Allowed {
		return sdk.NewError(sdk.ErrUnauthorized, "RBAC: "+az.Reason+".")
	}
	dec, err := d.policy.MessagesDeny(ctx, d.policyInput(cl, req, act, az))
	if err != nil {
		return sdk.NewError(sdk.ErrInternalError, "The messages policy did not decide in time.")
	}
	if dec.Deny {
		return sdk.NewError(sdk.ErrUnauthorized, "Policy: "+strings.Join(dec.Reasons, "; "))
	}
	sum := d.requestSummary(cl, req)
	if cl.conf.red != nil {
		s := &scrubber{red: cl.conf.red}
		s.message(m)
		req.Metadata = s.meta(req.Metadata)
		if s.err != nil {
			return sdk.NewError(sdk.ErrInvalidParams, "The message could not be scanned for sensitive data.")
		}
		if s.res.Blocked != "" {
			return sdk.NewError(sdk.ErrInvalidParams, fmt.Sprintf("The message carries %s data, which this gateway does not relay.", s.res.Blocked)).
				WithDetails(map[string]any{"code": "content_filter"})
		}
		if len(s.res.Counts) > 0 {
			sum["redactions"] = s.res.Counts
			cl.ex.Redacted(s.res.Counts)
		}
	}
	// After redaction: the gateway's own link is not the caller's text.
	if err := d.toBlobs(ctx, cl, m.Parts, cl.target.ID); err != nil {
		return sdk.NewError(sdk.ErrInternalError, "A file of the message could not be kept for the agent.")
	}
	return d.record(ctx, cl, KindRequest, sum)
}

// action is what the caller's messages rules allow: the skill the message
// names, or "message" for one that names none.
func action(skill string) string {
	if skill == "" {
		return "message"
	}
	return skill
}

// policyInput is data.gateway.messages.deny's input for an A2A message.
func (d *Door) policyInput(cl *call, req *sdk.SendMessageRequest, act string, az policy.Authz) map[string]any {
	m := req.Message
	var skill any
	if cl.rpc.skill != "" {
		skill = cl.rpc.skill
	}
	msg := map[string]any{
		"format": "a2a", "dialect": "a2a", "method": cl.rpc.method, "id": m.ID, "type": "request", "priority": "normal",
		"sender": cl.caller.ID, "recipient": cl.target.ID, "group": nil, "action": act, "skill": skill,
		"part_kinds": policy.StringsInput(partKinds(m.Parts)), "task_id": string(m.TaskID), "context_id": m.ContextID,
		"payload_bytes": int64(cl.size), "plan_verbs": []any{},
	}
	agent := cl.conf.agentIn[cl.caller.ID]
	if agent == nil {
		agent = policy.AgentInput(cl.caller)
	}
	recipient := cl.conf.agentIn[cl.target.ID]
	return map[string]any{"dialect": "a2a", "agent": agent, "message": msg, "recipient": recipient, "authz": policy.AuthzInput(az)}
}

// partKinds names each part's content: text, data, file (bytes or a URL).
func partKinds(ps sdk.ContentParts) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if p == nil {
			continue
		}
		switch p.Content.(type) {
		case sdk.Text:
			out = append(out, "text")
		case sdk.Data:
			out = append(out, "data")
		default:
			out = append(out, "file")
		}
	}
	return out
}

// relayStream passes an agent's events to the caller, each answered as
// answer does; a refused event ends the stream with its error.
func (d *Door) relayStream(ctx context.Context, cl *call, events iter.Seq2[sdk.Event, error], yield func(sdk.Event, error) bool) {
	for ev, err := range events {
		if err != nil {
			yield(nil, d.upstreamError(ctx, cl, err))
			return
		}
		if err := d.answer(ctx, cl, ev); err != nil {
			yield(nil, err)
			return
		}
		if !yield(ev, nil) {
			return
		}
	}
}

// answer takes what the agent sent for the caller: its task and context
// become the caller's (one already another's is withheld), it is
// redacted (a blocking detector withholds it), and audited.
func (d *Door) answer(ctx context.Context, cl *call, ev sdk.Event) error {
	if ev == nil {
		return d.withhold(ctx, cl, "The agent sent an empty answer.")
	}
	info := ev.TaskInfo()
	if !d.owners.claim(ownTask, cl.target.ID, string(info.TaskID), cl.caller.ID) ||
		!d.owners.claim(ownContext, cl.target.ID, info.ContextID, cl.caller.ID) {
		return d.withhold(ctx, cl, "The agent answered with a task of another caller.")
	}
	res, err := scrub(cl.conf.red, ev)
	if err != nil {
		return d.withhold(ctx, cl, "The agent's answer could not be scanned for sensitive data.")
	}
	if res.Blocked != "" {
		return d.withhold(ctx, cl, fmt.Sprintf("The agent's answer carries %s data, which this gateway does not relay.", res.Blocked))
	}
	for _, ps := range eventParts(ev) {
		if err := d.toBlobs(ctx, cl, ps, cl.caller.ID); err != nil {
			return d.withhold(ctx, cl, "A file of the agent's answer could not be kept for the caller.")
		}
	}
	sum := eventSummary(cl, ev)
	review, err := d.askPerson(ctx, cl, ev)
	if err != nil {
		return err
	}
	if review != "" {
		sum["escalation_id"] = review
	}
	if len(res.Counts) > 0 {
		sum["redactions"] = res.Counts
		cl.ex.Redacted(res.Counts)
	}
	raw, _ := json.Marshal(ev)
	return d.recordPayload(ctx, cl, KindResponse, sum, sha256Hex(raw))
}

// withhold refuses what the agent sent, audited as a response withheld.
func (d *Door) withhold(ctx context.Context, cl *call, msg string) error {
	sum := d.requestSummary(cl, nil)
	sum["status"] = "withheld"
	sum["reason"] = msg
	_ = d.record(ctx, cl, KindResponse, sum)
	return sdk.NewError(sdk.ErrInvalidAgentResponse, msg)
}

// upstreamError is what the caller is told of a failed call to the
// agent: A2A's error of the same kind with its message redacted, never
// its details or the agent's address.
func (d *Door) upstreamError(ctx context.Context, cl *call, err error) error {
	var ae *sdk.Error
	out := sdk.NewError(sdk.ErrInternalError, "The agent did not answer.")
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		out = sdk.NewError(sdk.ErrInternalError, "The agent did not answer in time.")
	} else if errors.As(err, &ae) {
		msg := ae.Message
		if cl.conf.red != nil {
			msg, _ = cl.conf.red.String(msg)
		}
		out = sdk.NewError(ae.Err, clipLong(msg))
	}
	sum := d.requestSummary(cl, nil)
	sum["status"] = "error"
	sum["error"] = out.Message
	_ = d.record(ctx, cl, KindResponse, sum)
	d.log.Warn("a2a: call to agent failed", "agent", cl.target.ID, "method", cl.rpc.method, "err", unwrapURL(err))
	return out
}

func clipLong(s string) string {
	if len(s) > 512 {
		return s[:512] + "…"
	}
	return s
}

// reject audits a refused call.
func (d *Door) reject(ctx context.Context, cl *call, method string, err error) {
	reason := err.Error() // it may quote what the caller sent
	if cl.conf.red != nil {
		reason, _ = cl.conf.red.String(reason)
	}
	sum := map[string]any{"dialect": "a2a", "agent": cl.target.ID, "method": method, "decision": "refused", "reason": reason}
	if cl.rpc != nil {
		addIDs(sum, cl.rpc)
	}
	_ = d.record(ctx, cl, KindReject, sum)
}

// requestSummary is the summary of a call's entries: the agent called,
// the method, the ids it names; req adds the message's skill and parts.
func (d *Door) requestSummary(cl *call, req *sdk.SendMessageRequest) map[string]any {
	sum := map[string]any{"dialect": "a2a", "agent": cl.target.ID, "method": cl.rpc.method, "decision": "allowed"}
	addIDs(sum, cl.rpc)
	if req != nil {
		sum["message_id"] = req.Message.ID
		sum["skill"] = cl.rpc.skill
		sum["part_kinds"] = partKinds(req.Message.Parts)
	}
	return sum
}

func addIDs(sum map[string]any, rc *rpcCall) {
	switch {
	case rc.send != nil:
		if id := rc.send.Message.TaskID; id != "" {
			sum["task_id"] = string(id)
		}
		if id := rc.send.Message.ContextID; id != "" {
			sum["context_id"] = id
		}
	case rc.taskID != "":
		sum["task_id"] = rc.taskID
	}
}

// eventSummary is the summary of an answer or event: its kind, task,
// context and state, an artifact's id.
func eventSummary(cl *call, ev sdk.Event) map[string]any {
	info := ev.TaskInfo()
	sum := map[string]any{"dialect": "a2a", "agent": cl.target.ID, "method": cl.rpc.method}
	if info.TaskID != "" {
		sum["task_id"] = string(info.TaskID)
	}
	if info.ContextID != "" {
		sum["context_id"] = info.ContextID
	}
	switch e := ev.(type) {
	case *sdk.Task:
		sum["event"], sum["state"] = "task", string(e.Status.State)
	case *sdk.Message:
		sum["event"], sum["message_id"] = "message", e.ID
	case *sdk.TaskStatusUpdateEvent:
		sum["event"], sum["state"] = "status", string(e.Status.State)
	case *sdk.TaskArtifactUpdateEvent:
		sum["event"] = "artifact"
		if e.Artifact != nil {
			sum["artifact_id"] = string(e.Artifact.ID)
		}
	}
	return sum
}

func (d *Door) record(ctx context.Context, cl *call, kind string, sum map[string]any) error {
	return d.recordPayload(ctx, cl, kind, sum, cl.payload)
}

// recordPayload appends an entry of cl's exchange.
func (d *Door) recordPayload(ctx context.Context, cl *call, kind string, sum map[string]any, digest string) error {
	return d.write(ctx, cl.caller.ID, cl.ex, kind, sum, digest)
}

// write appends an entry for agent (of exchange ex, nil for none); in
// closed mode an entry that cannot be written refuses the call.
func (d *Door) write(ctx context.Context, agent string, ex *scope.Exchange, kind string, sum map[string]any, digest string) error {
	o := &audit.Object{}
	for k, v := range sum {
		o.Any(k, v)
	}
	rec := audit.Record{Kind: kind, AgentID: agent, PayloadSHA256: digest, Object: o}
	if ex != nil {
		rec.SessionID, rec.RequestID = ex.SessionID, ex.RequestID
	}
	if err := d.audit.Write(ctx, rec); err != nil {
		return sdk.NewError(sdk.ErrInternalError, "The audit trail is unavailable: nothing was relayed.")
	}
	return nil
}
