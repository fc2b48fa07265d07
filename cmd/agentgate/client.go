package main

import (
	"bufio"
	"bytes"
	"cmp"
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
	"sync"
	"text/tabwriter"
	"time"

	"github.com/agentgate/agentgate/core"
	imcp "github.com/agentgate/agentgate/interfaces/mcp"
)

// client talks to a running gateway's REST API.
type client struct {
	base   string
	key    string
	http   *http.Client
	stderr io.Writer
	warn   sync.Once // the plain-http warning, once
}

// clientFlags adds --server and --api-key to fs; warnings go to fs's output.
func clientFlags(fs *flag.FlagSet) *client {
	c := &client{http: &http.Client{CheckRedirect: imcp.RefuseRedirect}, stderr: fs.Output()}
	fs.StringVar(&c.base, "server", envOr("AGENTGATE_URL", "http://127.0.0.1:8080"), "gateway URL")
	fs.StringVar(&c.key, "api-key", os.Getenv("AGENTGATE_API_KEY"), "API key")
	return c
}

// apiError is an error answer of the API.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (%d %s)", printable(e.Message), e.Status, printable(e.Code))
}

func (c *client) request(ctx context.Context, method, path string, body any, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
		c.warn.Do(func() {
			if w := imcp.PlainKeyWarning(c.base, c.key); w != "" {
				fmt.Fprintln(c.stderr, "warning:", w)
			}
		})
	}
	// The gateway records the CLI's decisions with the route cli; who
	// decided is the key.
	req.Header.Set("User-Agent", "agentgate-cli/"+buildVersion())
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the gateway at %s (is `agentgate serve` running? set --server): %w", c.base, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
			return nil, &apiError{Status: resp.StatusCode, Code: "http", Message: strings.TrimSpace(string(b))}
		}
		return nil, &apiError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	return resp, nil
}

func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.request(ctx, method, path, body, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	// An answer without end (not a gateway, or a broken one) is refused
	// rather than held in memory.
	lr := &io.LimitedReader{R: resp.Body, N: maxAnswer + 1}
	if err := json.NewDecoder(lr).Decode(out); err != nil {
		if lr.N <= 0 {
			return fmt.Errorf("the gateway at %s answered %s %s with more than %d MiB; not read", c.base, method, path, maxAnswer>>20)
		}
		return fmt.Errorf("the gateway at %s answered %s %s with JSON this CLI cannot read: %w", c.base, method, path, err)
	}
	return nil
}

// maxAnswer is the largest JSON answer the CLI reads; a page of 100 runs
// or a session's messages is far smaller.
const maxAnswer = 64 << 20

// run as the API returns it.
type apiRun struct {
	core.Run
	PendingApprovals []core.Approval `json:"pending_approvals"`
}

func approvalsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &usageError{"approvals: say list, approve ID or deny ID"}
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("approvals "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := clientFlags(fs)
	status := fs.String("status", "pending", "list: pending, approved, denied, expired, cancelled or all")
	reason := fs.String("reason", "", "approve/deny: why")
	if err := fs.Parse(reorder(rest)); err != nil {
		return &usageError{err.Error()}
	}
	switch sub {
	case "list":
		q := url.Values{}
		if *status != "all" {
			q.Set("status", *status)
		}
		items, err := allPages[core.Approval](ctx, c, "/api/v1/approvals?"+q.Encode()+"&cursor=")
		if err != nil {
			return err
		}
		if len(items) == 0 {
			fmt.Fprintf(stdout, "no %s approvals\n", *status)
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATUS\tTOOL\tARGUMENTS\tRUN\tEXPIRES")
		for _, a := range items {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Status, toolOf(a), a.Arguments, a.RunID, a.ExpiresAt.Local().Format(time.DateTime))
		}
		return tw.Flush()
	case "approve", "deny":
		if fs.NArg() != 1 {
			return &usageError{fmt.Sprintf("approvals %s: give exactly one approval id", sub)}
		}
		a, err := decide(ctx, c, fs.Arg(0), sub, *reason)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "approval %s is %s (by %s)\n", a.ID, a.Status, a.DecidedBy)
		return nil
	}
	return &usageError{fmt.Sprintf("approvals: unknown subcommand %q (list, approve, deny)", sub)}
}

// decide decides approval id as the client's key (the gateway records the
// key, never a name the client sends).
func decide(ctx context.Context, c *client, id, decision, reason string) (core.Approval, error) {
	var a core.Approval
	err := c.do(ctx, "POST", "/api/v1/approvals/"+url.PathEscape(id)+"/decision",
		map[string]string{"decision": decision, "reason": reason}, &a)
	return a, err
}

// auditCmd lists the audit log, newest first.
func auditCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := clientFlags(fs)
	principal := fs.String("principal", "", "only this principal (key:ci, slack:T1/U2, …)")
	action := fs.String("action", "", "only this action (approval.approve, approval.refused, run.cancel, …)")
	target := fs.String("target", "", "only this approval, run or routine")
	route := fs.String("route", "", "only this route (api, cli, mcp, slack, discord, telegram)")
	since := fs.String("since", "", "only entries at or after this RFC 3339 time")
	limit := fs.Int("limit", 50, "entries to show (1-500)")
	if err := fs.Parse(reorder(args)); err != nil {
		return &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("audit takes no arguments, got %q", fs.Args())}
	}
	q := url.Values{}
	for k, v := range map[string]string{"principal": *principal, "action": *action, "target": *target, "route": *route, "since": *since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	q.Set("limit", fmt.Sprint(*limit))
	var page core.Page[core.AuditEntry]
	if err := c.do(ctx, "GET", "/api/v1/audit?"+q.Encode(), nil, &page); err != nil {
		return err
	}
	if len(page.Items) == 0 {
		fmt.Fprintln(stdout, "no audit entries")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tPRINCIPAL\tROUTE\tACTION\tTARGET\tOUTCOME\tDETAIL")
	for _, e := range page.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.Local().Format(time.DateTime), cmp.Or(e.Principal, "-"), e.Route, e.Action, e.Target, e.Outcome, e.Detail)
	}
	return tw.Flush()
}

// reorder moves flags before positional arguments so `approve ID --reason x` works.
func reorder(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			flags = append(flags, a)
			if !strings.Contains(a, "=") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func runsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "show" {
		return &usageError{"runs: say show ID"}
	}
	fs := flag.NewFlagSet("runs show", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := clientFlags(fs)
	if err := fs.Parse(reorder(args[1:])); err != nil {
		return &usageError{err.Error()}
	}
	if fs.NArg() != 1 {
		return &usageError{"runs show: give exactly one run id"}
	}
	id := url.PathEscape(fs.Arg(0))
	var run apiRun
	if err := c.do(ctx, "GET", "/api/v1/runs/"+id, nil, &run); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run      %s (%s)\nagent    %s\nsession  %s\nstatus   %s\ninput    %s\n",
		run.ID, run.Type, run.AgentID, run.SessionID, run.Status, run.Input)
	if run.Output != "" {
		fmt.Fprintf(stdout, "output   %s\n", run.Output)
	}
	if run.Error != "" {
		fmt.Fprintf(stdout, "error    %s\n", run.Error)
	}
	for _, a := range run.PendingApprovals {
		fmt.Fprintf(stdout, "pending  approval %s: %s %s (expires %s)\n", a.ID, toolOf(a), a.Arguments, a.ExpiresAt.Local().Format(time.DateTime))
	}
	var page core.Page[core.Event]
	if err := c.do(ctx, "GET", "/api/v1/runs/"+id+"/events?limit=5000", nil, &page); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "journal:")
	for _, ev := range page.Items {
		fmt.Fprintf(stdout, "  %3d  %s  %-18s %s\n", ev.Seq, ev.CreatedAt.Local().Format("15:04:05.000"), ev.Type, ev.Data)
	}
	return nil
}

// chat is a terminal conversation with an agent through a running gateway;
// a pending approval is shown inline and decided from the prompt.
func chat(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := clientFlags(fs)
	session := fs.String("session", "", "continue this session id")
	user := fs.String("user", envOr("USER", "cli"), "your user id")
	if err := fs.Parse(reorder(args)); err != nil {
		return &usageError{err.Error()}
	}
	if fs.NArg() != 1 {
		return &usageError{"chat: give the agent id (agentgate chat demo)"}
	}
	agent := fs.Arg(0)
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 0, 64<<10), 1<<20)
	fmt.Fprintf(stdout, "chatting with %s at %s — type a message, /quit to leave\n", agent, c.base)
	for {
		fmt.Fprint(stdout, "you> ")
		if !in.Scan() {
			fmt.Fprintln(stdout)
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		switch line {
		case "":
			continue
		case "/quit", "/exit":
			return nil
		}
		resp, err := c.request(ctx, "POST", "/api/v1/agents/"+url.PathEscape(agent)+"/runs",
			map[string]string{"input": line, "session_id": *session, "user_id": *user}, "text/event-stream")
		if err != nil {
			fmt.Fprintln(stdout, "error:", err)
			continue
		}
		for {
			run, shown, err := followStream(resp.Body, stdout)
			resp.Body.Close()
			if err != nil {
				fmt.Fprintln(stdout, "\nerror:", err)
				break
			}
			*session = run.SessionID
			if run.Status != core.RunPaused {
				if !shown || run.Status != core.RunCompleted {
					printOutcome(stdout, run)
				}
				break
			}
			if !askApprovals(ctx, c, in, stdout, run, *user) {
				return nil
			}
			resp, err = c.request(ctx, "GET", fmt.Sprintf("/api/v1/runs/%s/events?after=%d", run.ID, run.LastSeq), nil, "text/event-stream")
			if err != nil {
				fmt.Fprintln(stdout, "error:", err)
				break
			}
		}
	}
}

// followStream prints streamed text and returns the run from the final event;
// shown reports whether the last model answer was printed as it streamed.
func followStream(body io.Reader, stdout io.Writer) (run apiRun, shown bool, err error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var event string
	started, streamed := false, false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data := strings.TrimPrefix(line, "data: ")
			switch event {
			case "delta":
				var d struct{ Text string }
				if json.Unmarshal([]byte(data), &d) == nil {
					if !started {
						fmt.Fprint(stdout, "agent> ")
						started = true
					}
					fmt.Fprint(stdout, d.Text)
					streamed = true
				}
			case string(core.EventModelResponse):
				shown, streamed = streamed, false
			case string(core.EventToolResult):
				var ev core.Event
				var tr core.ToolResult
				if json.Unmarshal([]byte(data), &ev) == nil && json.Unmarshal(ev.Data, &tr) == nil {
					if started {
						fmt.Fprintln(stdout)
						started = false
					}
					fmt.Fprintf(stdout, "  [%s → %s]\n", tr.Tool, tr.Content)
				}
			case "run":
				if started {
					fmt.Fprintln(stdout)
				}
				err := json.Unmarshal([]byte(data), &run)
				return run, shown, err
			case "error":
				return run, false, errors.New(data)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return run, false, err
	}
	return run, false, errors.New("the stream ended before the run settled")
}

func printOutcome(stdout io.Writer, run apiRun) {
	switch run.Status {
	case core.RunCompleted:
		fmt.Fprintf(stdout, "agent> %s\n", run.Output)
	case core.RunFailed:
		fmt.Fprintf(stdout, "run failed: %s\n", run.Error)
	default:
		fmt.Fprintf(stdout, "run %s\n", run.Status)
	}
}

// toolOf is a's tool as the CLI shows it: with its MCP server, if any.
func toolOf(a core.Approval) string {
	if s := a.Server(); s != "" {
		return a.Tool + " from MCP server " + s
	}
	return a.Tool
}

// askApprovals shows each pending approval and sends the user's decision;
// false means the user ended the chat.
func askApprovals(ctx context.Context, c *client, in *bufio.Scanner, stdout io.Writer, run apiRun, user string) bool {
	for _, a := range run.PendingApprovals {
		fmt.Fprintf(stdout, "\n  approval needed: %s wants to call %s with %s\n  (expires %s, id %s)\n",
			run.AgentID, toolOf(a), a.Arguments, a.ExpiresAt.Local().Format(time.Kitchen), a.ID)
		for {
			fmt.Fprint(stdout, "  approve? [y]es / [n]o [reason]: ")
			if !in.Scan() {
				return false
			}
			ans := strings.TrimSpace(in.Text())
			word, reason, _ := strings.Cut(ans, " ")
			var decision string
			switch strings.ToLower(word) {
			case "y", "yes":
				decision = "approve"
			case "n", "no":
				decision = "deny"
			default:
				continue
			}
			d, err := decide(ctx, c, a.ID, decision, strings.TrimSpace(reason))
			var ae *apiError
			if errors.As(err, &ae) && ae.Code == "approval_not_pending" {
				fmt.Fprintf(stdout, "  %s\n", ae.Message)
				break
			}
			if err != nil {
				fmt.Fprintln(stdout, "  error:", err)
				continue
			}
			fmt.Fprintf(stdout, "  %s by %s\n", d.Status, d.DecidedBy)
			break
		}
	}
	return true
}

// maxListed bounds what a list command reads: a gateway answering page
// after page would otherwise be read until the CLI runs out of memory.
const maxListed = 100_000

// allPages reads every page of a list, path ending with "cursor=". It
// stops with an error when a page's cursor repeats an earlier one (a
// gateway that would be read forever) or past maxListed items.
func allPages[T any](ctx context.Context, c *client, path string) ([]T, error) {
	var items []T
	seen := map[string]bool{}
	for cursor := ""; ; {
		var page core.Page[T]
		if err := c.do(ctx, "GET", path+url.QueryEscape(cursor), nil, &page); err != nil {
			return nil, err
		}
		items = append(items, page.Items...)
		cursor = page.NextCursor
		switch {
		case cursor == "":
			return items, nil
		case seen[cursor]:
			return nil, fmt.Errorf("the gateway at %s sent the page cursor %q twice; stopped reading the list", c.base, cursor)
		case len(items) > maxListed:
			return nil, fmt.Errorf("the gateway at %s listed more than %d items; stopped reading the list", c.base, maxListed)
		}
		seen[cursor] = true
	}
}
