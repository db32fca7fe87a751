package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// toolInfo is a tool as its server describes it in its own tools/list.
type toolInfo struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Annotations jsontext.Value `json:"annotations"`
	InputSchema jsontext.Value `json:"inputSchema"`
	// raw is the whole definition as the server sent it.
	raw jsontext.Value
	// def is what a pin binds (name, description, inputSchema and
	// annotations) in RFC 8785 form, sha its SHA-256.
	def jsontext.Value
	sha string
	// in is input.tool of the policy's decisions on the tool (inErr when
	// its annotations cannot be converted), made once when the list is
	// read: a list stays in use for many calls.
	in    map[string]any
	inErr error
}

// How the gateway keeps a server's tool list. The annotations decide
// (destructiveHint sends a call to a person), so the list is read again
// when the server says it changed, when a call names a tool it does not
// hold, and at the latest after catalogMaxAge: a server that changes a
// tool without telling this gateway's sessions is not believed for long.
const (
	catalogMaxAge = time.Minute
	// catalogRetry spaces the reads a name the list does not hold, or a
	// failed read, may cause: an agent calling made-up tools cannot make
	// the gateway hammer the server.
	catalogRetry = 2 * time.Second
	// maxToolPages bounds a paginated list.
	maxToolPages = 50
)

// errUnknownTool: the server's list does not hold the tool.
var errUnknownTool = errors.New("no such tool")

// catalog is one server's tool list as the gateway read it.
type catalog struct {
	mu    sync.Mutex
	tools map[string]toolInfo
	at    time.Time // of the last read that succeeded
	// gen counts the changes the server announced; a read that began
	// before the last one is stale when it ends.
	gen, readGen int
	tried        time.Time // of the last read begun
	err          error     // of the last read
	filling      chan struct{}
}

// invalidate marks the list changed (notifications/tools/list_changed).
func (c *catalog) invalidate() {
	c.mu.Lock()
	c.gen++
	c.mu.Unlock()
}

// known reports whether the last list read holds name (for bounded metric
// labels).
func (c *catalog) known(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.tools[name]
	return ok
}

// lookup returns tool name as its server describes it, reading the list
// first when it is old, changed, or does not hold the name. A list that
// cannot be read fails the lookup: the gateway never decides on
// annotations it could not confirm.
func (c *catalog) lookup(ctx context.Context, name string, read func(context.Context) (map[string]toolInfo, error)) (toolInfo, error) {
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		now := time.Now()
		fresh := c.tools != nil && c.readGen == c.gen && now.Sub(c.at) < catalogMaxAge
		recent := now.Sub(c.tried) < catalogRetry
		switch {
		case fresh:
			if ti, ok := c.tools[name]; ok {
				c.mu.Unlock()
				return ti, nil
			}
			if attempt > 0 || recent {
				c.mu.Unlock()
				return toolInfo{}, errUnknownTool
			}
		case attempt > 0 || (recent && c.err != nil):
			err := c.err
			c.mu.Unlock()
			if err == nil {
				err = errors.New("the tool list changed while it was read")
			}
			return toolInfo{}, err
		}
		wait := c.filling
		if wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return toolInfo{}, ctx.Err()
			}
		}
		wait = make(chan struct{})
		c.filling, c.tried = wait, now
		gen := c.gen
		c.mu.Unlock()
		tools, err := read(ctx)
		c.mu.Lock()
		if err == nil {
			c.tools, c.at, c.readGen = tools, time.Now(), gen
		}
		c.err, c.filling = err, nil
		close(wait)
		c.mu.Unlock()
	}
}

// all returns the whole list, read first when it is old or changed, as
// lookup does.
func (c *catalog) all(ctx context.Context, read func(context.Context) (map[string]toolInfo, error)) (map[string]toolInfo, error) {
	c.mu.Lock()
	tools := c.tools
	fresh := tools != nil && c.readGen == c.gen && time.Since(c.at) < catalogMaxAge
	c.mu.Unlock()
	if fresh {
		return tools, nil
	}
	// No tool has the empty name: lookup reads the list, then misses.
	if _, err := c.lookup(ctx, "", read); err != nil && !errors.Is(err, errUnknownTool) {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tools == nil {
		return nil, errors.New("no tool list read")
	}
	return c.tools, nil
}

// gatewayClient is how the gateway introduces itself when it reads a
// server's tools (its own session, with its own credentials).
const gatewayClient = `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sacp-gateway","version":"1"}}`

// readTools reads srv's tools/list in a session of the gateway's own: the
// annotations the policy decides on come from the server, never from an
// agent. The whole read is bounded by the server's timeout.
func (d *Door) readTools(ctx context.Context, srv *server) (map[string]toolInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, srv.timeout)
	defer cancel()
	var h hop
	resp, result, err := d.ask(ctx, srv, h, request(jsontext.Value("1"), "initialize", jsontext.Value(gatewayClient)))
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(result, &init); err != nil || !slices.Contains(protocolVersions, init.ProtocolVersion) {
		return nil, errors.New("initialize: the server negotiated no protocol version the gateway serves")
	}
	h.protocol = init.ProtocolVersion
	if id := resp.Header.Get(hdrSession); id != "" {
		if !validSessionID(id) {
			return nil, errors.New("initialize: the server's session id is not visible ASCII")
		}
		h.session = id
		defer d.closeSession(ctx, srv, h)
	}
	if err := d.tell(ctx, srv, h, request(nil, "notifications/initialized", nil)); err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	tools := map[string]toolInfo{}
	params := jsontext.Value("{}")
	for page := range maxToolPages {
		_, result, err := d.ask(ctx, srv, h, request(jsontext.Value(strconv.Itoa(page+2)), "tools/list", params))
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		list, next, err := readToolList(result)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, ti := range list {
			tools[ti.Name] = ti
		}
		if next == "" {
			return tools, nil
		}
		if params, err = json.Marshal(map[string]string{"cursor": next}); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("tools/list: more than %d pages", maxToolPages)
}

// readToolList reads a tools/list result: its tools (a name each, an
// object or nothing as annotations) and the next page's cursor. Other
// members are the server's business; a name twice is refused.
func readToolList(result jsontext.Value) ([]toolInfo, string, error) {
	var page struct {
		Tools      []jsontext.Value `json:"tools"`
		NextCursor string           `json:"nextCursor"`
	}
	if err := json.Unmarshal(result, &page); err != nil {
		return nil, "", fmt.Errorf("not a tool list: %w", err)
	}
	out := make([]toolInfo, 0, len(page.Tools))
	seen := map[string]bool{}
	for i, raw := range page.Tools {
		ti, err := readTool(raw)
		if err != nil {
			return nil, "", fmt.Errorf("tools[%d]: %w", i, err)
		}
		if seen[ti.Name] {
			return nil, "", fmt.Errorf("tool %s is listed twice", quote(ti.Name))
		}
		seen[ti.Name] = true
		out = append(out, ti)
	}
	return out, page.NextCursor, nil
}

// readTool reads one tool of a list.
func readTool(raw jsontext.Value) (toolInfo, error) {
	ti := toolInfo{raw: raw}
	if err := json.Unmarshal(raw, &ti); err != nil || ti.Name == "" {
		return toolInfo{}, errors.New("a tool is an object with a name")
	}
	switch ti.Annotations.Kind() {
	case 0, 'n':
		ti.Annotations = nil
	case '{':
	default:
		return toolInfo{}, fmt.Errorf("tool %s: annotations must be an object", quote(ti.Name))
	}
	var err error
	if ti.def, ti.sha, err = definition(ti); err != nil {
		return toolInfo{}, fmt.Errorf("tool %s: %w", quote(ti.Name), err)
	}
	ti.in, ti.inErr = convertTool(ti)
	return ti, nil
}

// ask sends the gateway's own request and returns the server's answer to
// it (its result; an error answer is an error).
func (d *Door) ask(ctx context.Context, srv *server, h hop, body []byte) (*http.Response, jsontext.Value, error) {
	sent, err := readMessage(body)
	if err != nil {
		return nil, nil, err
	}
	resp, err := d.send(ctx, srv, http.MethodPost, h, body, "application/json, text/event-stream")
	if err != nil {
		return nil, nil, err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		return nil, nil, &statusError{resp.StatusCode}
	}
	var got *message
	err = readReply(resp, func(m *message) (bool, error) {
		if m.isResponse() && sameID(m.id, sent.id) {
			got = m
			return true, nil
		}
		return false, nil
	})
	switch {
	case err != nil:
		return nil, nil, err
	case got == nil:
		return nil, nil, errors.New("no response")
	case got.errObj != nil:
		return nil, nil, fmt.Errorf("error %d", got.errObj.Code)
	}
	return resp, got.result, nil
}

// tell sends the gateway's own notification.
func (d *Door) tell(ctx context.Context, srv *server, h hop, body []byte) error {
	resp, err := d.send(ctx, srv, http.MethodPost, h, body, "application/json, text/event-stream")
	if err != nil {
		return err
	}
	drain(resp)
	if resp.StatusCode/100 != 2 {
		return &statusError{resp.StatusCode}
	}
	return nil
}

// closeSession ends a session of the gateway's own, best effort.
func (d *Door) closeSession(ctx context.Context, srv *server, h hop) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), srv.timeout)
	defer cancel()
	if resp, err := d.send(ctx, srv, http.MethodDelete, h, nil, "application/json"); err == nil {
		drain(resp)
	}
}
