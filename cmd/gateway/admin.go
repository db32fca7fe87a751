package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// The admin API's clients: gateway agents … and gateway keys …
// (docs/admin-api.md). They call a running gateway at --url with the admin
// token (--token, else $GATEWAY_ADMIN_TOKEN); the gateway checks and
// audits every change, so these commands hold no rule of their own.

const (
	urlEnv   = "GATEWAY_URL"
	tokenEnv = "GATEWAY_ADMIN_TOKEN"
)

// adminClient is the flags every admin command takes.
type adminClient struct {
	url, token string
	out        io.Writer
	name       string // the command, for errors
}

// newAdminClient is the client of the admin command name and its flag set,
// with the flags every admin command takes.
func newAdminClient(name string, stdout, stderr io.Writer) (*adminClient, *flag.FlagSet) {
	c := &adminClient{out: stdout, name: name}
	fs := newFlagSet(name, stderr)
	def := os.Getenv(urlEnv)
	if def == "" {
		def = "http://127.0.0.1:8080"
	}
	fs.StringVar(&c.url, "url", def, "the gateway's base URL ($"+urlEnv+" sets the default)")
	fs.StringVar(&c.token, "token", "", "the admin token (default $"+tokenEnv+"); prefer the environment: a flag shows in the process list")
	return c, fs
}

// parseAdmin parses a command's flags around exactly n positional
// arguments, which may come before or after the flags.
func parseAdmin(fs *flag.FlagSet, args []string, n int, usage string, stderr io.Writer) ([]string, int, bool) {
	var pos []string
	for len(args) > 0 && len(pos) < n && !strings.HasPrefix(args[0], "-") {
		pos, args = append(pos, args[0]), args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK, false
		}
		return nil, exitUsage, false
	}
	pos = append(pos, fs.Args()...)
	if len(pos) != n {
		fmt.Fprintf(stderr, "usage: gateway %s %s\n", fs.Name(), usage)
		return nil, exitUsage, false
	}
	return pos, exitOK, true
}

// call sends one request and decodes the answer into out (nil: none). A
// refusal is one sentence on stderr: the API's message and status.
func (c *adminClient) call(method, path string, body any, out any, stderr io.Writer) int {
	tok := c.token
	if tok == "" {
		tok = os.Getenv(tokenEnv)
	}
	if tok == "" {
		fmt.Fprintf(stderr, "gateway %s: no admin token: set $%s or --token\n", c.name, tokenEnv)
		return exitUsage
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			fmt.Fprintf(stderr, "gateway %s: %v\n", c.name, err)
			return exitUsage
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.url, "/")+path, rd)
	if err != nil {
		fmt.Fprintf(stderr, "gateway %s: --url %s: %v\n", c.name, c.url, err)
		return exitUsage
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "gateway %s: %v\n", c.name, err)
		return exitFailed
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if res.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if json.Unmarshal(raw, &e) != nil || e.Error.Message == "" {
			e.Error.Message = strings.TrimSpace(string(raw))
		}
		fmt.Fprintf(stderr, "gateway %s: %s (HTTP %d)\n", c.name, e.Error.Message, res.StatusCode)
		return exitFailed
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			fmt.Fprintf(stderr, "gateway %s: the answer is not what the admin API sends: %v\n", c.name, err)
			return exitFailed
		}
	}
	return exitOK
}

// fieldFlags is --set key=value, repeated: the value is read as JSON when
// it is JSON (a number, a list, true), else as a string.
type fieldFlags map[string]json.RawMessage

func (f fieldFlags) String() string { return "" }

func (f fieldFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	if json.Valid([]byte(v)) && v != "" {
		f[k] = json.RawMessage(v)
	} else {
		b, _ := json.Marshal(v)
		f[k] = b
	}
	return nil
}

func agentsMain(sub string) func([]string, io.Writer, io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		c, fs := newAdminClient("agents "+sub, stdout, stderr)
		fields := fieldFlags{}
		asJSON := false
		n, usage := 1, "NAME [--url URL] [--token T]"
		switch sub {
		case "list":
			n, usage = 0, "[--json] [--url URL] [--token T]"
			fs.BoolVar(&asJSON, "json", false, "print the API's JSON")
		case "create", "update":
			usage = "NAME [--set key=value]... [--url URL] [--token T]"
			fs.Var(fields, "set", "a field of the agents.yaml entry, key=value (a JSON value, or a string); repeat for several; update: null removes one")
		}
		pos, code, ok := parseAdmin(fs, args, n, usage, stderr)
		if !ok {
			return code
		}
		switch sub {
		case "list":
			return c.listAgents(asJSON, stderr)
		case "create":
			body := map[string]any{"name": pos[0]}
			for k, v := range fields {
				body[k] = v
			}
			return c.printed(http.MethodPost, "/admin/agents", body, stderr)
		case "update":
			return c.printed(http.MethodPatch, "/admin/agents/"+url.PathEscape(pos[0]), fields, stderr)
		case "disable", "enable":
			return c.printed(http.MethodPatch, "/admin/agents/"+url.PathEscape(pos[0]), map[string]bool{"disabled": sub == "disable"}, stderr)
		}
		if code := c.call(http.MethodDelete, "/admin/agents/"+url.PathEscape(pos[0]), nil, nil, stderr); code != exitOK {
			return code
		}
		fmt.Fprintf(stdout, "deleted agent %s and its keys\n", pos[0])
		return exitOK
	}
}

// printed calls the API and prints its JSON answer, indented.
func (c *adminClient) printed(method, path string, body any, stderr io.Writer) int {
	var out json.RawMessage
	if code := c.call(method, path, body, &out, stderr); code != exitOK {
		return code
	}
	var b bytes.Buffer
	_ = json.Indent(&b, out, "", "  ")
	fmt.Fprintln(c.out, b.String())
	return exitOK
}

func (c *adminClient) listAgents(asJSON bool, stderr io.Writer) int {
	if asJSON {
		return c.printed(http.MethodGet, "/admin/agents", nil, stderr)
	}
	var out struct {
		Agents []struct {
			Name, Team, Type  string
			Runtime, Disabled bool
		}
	}
	if code := c.call(http.MethodGet, "/admin/agents", nil, &out, stderr); code != exitOK {
		return code
	}
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTEAM\tTYPE\tSOURCE\tSTATE")
	for _, a := range out.Agents {
		src, state := "agents.yaml", "active"
		if a.Runtime {
			src = "runtime"
		}
		if a.Disabled {
			state = "disabled"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Name, dash(a.Team), dash(a.Type), src, state)
	}
	return flushed(tw, stderr)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func flushed(tw *tabwriter.Writer, stderr io.Writer) int {
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "gateway: %v\n", err)
		return exitFailed
	}
	return exitOK
}

func keysMain(sub string) func([]string, io.Writer, io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		c, fs := newAdminClient("keys "+sub, stdout, stderr)
		n, usage := 1, "AGENT [--url URL] [--token T]"
		var expiresIn string
		switch sub {
		case "issue":
			usage = "AGENT [--expires-in DURATION] [--url URL] [--token T]"
			fs.StringVar(&expiresIn, "expires-in", "", "the key expires after this long (720h); empty: never")
		case "revoke":
			n, usage = 2, "AGENT KEY_ID [--url URL] [--token T]"
		}
		pos, code, ok := parseAdmin(fs, args, n, usage, stderr)
		if !ok {
			return code
		}
		base := "/admin/agents/" + url.PathEscape(pos[0]) + "/keys"
		switch sub {
		case "list":
			return c.listKeys(base, stderr)
		case "issue":
			var body any
			if expiresIn != "" {
				body = map[string]string{"expires_in": expiresIn}
			}
			var k struct {
				ID, Key   string
				ExpiresAt string `json:"expires_at"`
			}
			if code := c.call(http.MethodPost, base, body, &k, stderr); code != exitOK {
				return code
			}
			// The key on stdout alone (scripts capture it); what it is on
			// stderr. It is shown this once.
			fmt.Fprintln(stdout, k.Key)
			fmt.Fprintf(stderr, "issued key %s for agent %s%s; it is shown this once\n", k.ID, pos[0], map[bool]string{true: "", false: ", expires " + k.ExpiresAt}[k.ExpiresAt == ""])
			return exitOK
		}
		if code := c.call(http.MethodDelete, base+"/"+url.PathEscape(pos[1]), nil, nil, stderr); code != exitOK {
			return code
		}
		fmt.Fprintf(stdout, "revoked key %s of agent %s\n", pos[1], pos[0])
		return exitOK
	}
}

func (c *adminClient) listKeys(path string, stderr io.Writer) int {
	var out struct {
		Keys []struct {
			ID       string `json:"id"`
			Created  string `json:"created_at"`
			Expires  string `json:"expires_at"`
			LastUsed string `json:"last_used_at"`
			By       string `json:"created_by"`
		}
	}
	if code := c.call(http.MethodGet, path, nil, &out, stderr); code != exitOK {
		return code
	}
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCREATED\tEXPIRES\tLAST USED\tBY")
	for _, k := range out.Keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Created, dash(k.Expires), dash(k.LastUsed), k.By)
	}
	return flushed(tw, stderr)
}
