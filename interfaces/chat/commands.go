package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
)

// Commands answers the commands every platform offers — run a routine now,
// list the routines, list the requests waiting for the asker's decision —
// the same way everywhere; a Dialect writes the answer the platform's way.
type Commands struct {
	Routines RoutineRunner  // nil: routines are not available
	Decider  Decider        // nil: neither routines nor approvals are
	Store    ApprovalLister // for the approvals list
}

// Dialect is how a platform writes a command's answer.
type Dialect struct {
	// Text escapes prose; Code makes an inline code span; Bold bold text.
	Text, Code, Bold func(string) string
	// Date shows a time (in the reader's zone where the platform can).
	Date func(time.Time) string
	// Bullet starts a list item.
	Bullet string
	// Usage is how a person writes the command sub with its arguments:
	// "/agentgate run <routine>", "/run <routine>".
	Usage func(sub, args string) string
}

// The answers when the gateway has no routines or approvals.
const (
	routinesOff  = "Routines are not available on this gateway."
	approvalsOff = "Approvals are not available on this gateway."
)

// ListRoutines lists the routines p may run (at most 50).
func (c Commands) ListRoutines(ctx context.Context, p approval.Principal, d Dialect) (string, error) {
	if c.Routines == nil {
		return d.Text(routinesOff), nil
	}
	page, err := c.Routines.List(ctx, core.RoutineFilter{ListOptions: core.ListOptions{Limit: 50}})
	if err != nil {
		return "", err
	}
	if len(page.Items) == 0 {
		return d.Text("No routines are defined. Add them under ") + d.Code("routines:") + d.Text(" in the config file."), nil
	}
	items, err := Callable(ctx, c.Decider, p, page.Items)
	if err != nil {
		return "", err
	}
	if len(items) == 0 {
		return d.Text("No routine here lets you run it: from chat, only the people, groups and channels a routine's ") +
			d.Code("callers:") + d.Text(" name may."), nil
	}
	var b strings.Builder
	b.WriteString(d.Bold(d.Text("Routines you may run")) + "\n")
	for _, r := range items {
		state := "on"
		if !r.Enabled {
			state = "off"
		}
		b.WriteString(d.Bullet + d.Code(r.ID) + d.Text(fmt.Sprintf(" (%s), agent %s, ", state, r.AgentID)) + d.Code(r.Schedule))
		if r.Enabled && r.NextFireAt != nil {
			b.WriteString(d.Text(", next ") + d.Date(*r.NextFireAt))
		}
		b.WriteString("\n")
	}
	if page.NextCursor != "" {
		b.WriteString(d.Text("…and more; ") + d.Code("agentgate routines list") + d.Text(" shows all.") + "\n")
	}
	b.WriteString(d.Text("Run one with ") + d.Code(d.Usage("run", "<routine>")) + d.Text("."))
	return b.String(), nil
}

// RunRoutine fires routine id for p now, with extra input, its output
// posted to b; dedupeKey names the command, so a redelivery fires nothing
// more.
func (c Commands) RunRoutine(ctx context.Context, p approval.Principal, b core.Binding, id, extra, dedupeKey string, d Dialect) (string, error) {
	if c.Routines == nil || c.Decider == nil {
		return d.Text(routinesOff), nil
	}
	if id == "" {
		return d.Text("Name the routine: ") + d.Code(d.Usage("run", "<routine> [extra input]")) + d.Text(". ") +
			d.Code(d.Usage("routines", "")) + d.Text(" lists them."), nil
	}
	run, err := c.Decider.Trigger(ctx, c.Routines, p, id, strings.TrimSpace(extra), b, dedupeKey)
	_, err = core.Replayed(run, err) // the command delivered again: its first run
	if errors.Is(err, core.ErrNotFound) {
		return d.Text("There is no routine ") + d.Code(id) + d.Text(". ") + d.Code(d.Usage("routines", "")) + d.Text(" lists them."), nil
	}
	if nc, ok := errors.AsType[*approval.NotCallerError](err); ok {
		return d.Text("You may not run routine ") + d.Code(id) + d.Text(": "+nc.Why+"."), nil
	}
	if ie, ok := errors.AsType[*core.InputError](err); ok {
		return d.Text(ie.Msg), nil
	}
	if err != nil {
		return "", err
	}
	return d.Text("Started routine ") + d.Code(id) + d.Text(" (run ") + d.Code(run.ID) + d.Text("). Its output will be posted here."), nil
}

// ListApprovals lists the pending requests of conversation b that p may
// decide.
func (c Commands) ListApprovals(ctx context.Context, p approval.Principal, b core.Binding, d Dialect) (string, error) {
	if c.Store == nil || c.Decider == nil {
		return d.Text(approvalsOff), nil
	}
	items, err := Decidable(ctx, c.Store, c.Decider, b, p)
	if err != nil {
		return "", err
	}
	if len(items) == 0 {
		return d.Text("Nothing is waiting for your decision here."), nil
	}
	var out strings.Builder
	out.WriteString(d.Bold(d.Text(fmt.Sprintf("Waiting for your decision here (%d)", len(items)))) + "\n")
	for _, a := range items {
		from := ""
		if s := a.Server(); s != "" {
			from = d.Text(" from MCP server ") + d.Code(s)
		}
		out.WriteString(d.Bullet + d.Text("run ") + d.Code(a.RunID) + d.Text(" wants to run ") + d.Code(a.Tool) + from +
			d.Text(" (approval ") + d.Code(a.ID) + d.Text(", expires ") + d.Date(a.ExpiresAt) + d.Text(")") + "\n")
	}
	out.WriteString(d.Text("Decide with the buttons on their cards."))
	return out.String(), nil
}

// UTC shows t as "Jan 2 15:04 UTC", for platforms that cannot show a time
// in each reader's zone.
func UTC(t time.Time) string { return t.UTC().Format("Jan 2 15:04 UTC") }
