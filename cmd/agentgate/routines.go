package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentgate/agentgate/core"
)

const routinesHelp = `Usage:
  agentgate routines list
  agentgate routines create --id ID --agent AGENT --schedule SPEC --input TEXT
      [--timezone ZONE] [--deliver-to TARGET] [--missed skip|once] [--disabled]
  agentgate routines delete ID                              routines created through the API or CLI only
  agentgate routines run ID [EXTRA INPUT...]               fire now; EXTRA INPUT is added to its input
  agentgate routines enable ID
  agentgate routines disable ID
  agentgate routines history ID [--limit N]                 its last N entries (default 20)
`

func routinesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, routinesHelp)
		return &usageError{"routines: say list, create, run ID, enable ID, disable ID, delete ID or history ID"}
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("routines "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, routinesHelp) }
	c := clientFlags(fs)
	limit := fs.Int("limit", 20, "history: entries to show")
	var spec core.RoutineSpec
	newID := fs.String("id", "", "create: the routine's id")
	optString(fs, &spec.Agent, "agent", "create: the agent that runs it")
	optString(fs, &spec.Schedule, "schedule", `create: cron ("0 9 * * 1-5"), @daily, @every 30m…`)
	optString(fs, &spec.Timezone, "timezone", "create: IANA zone of the schedule (default UTC)")
	optString(fs, &spec.Input, "input", "create: what the agent is asked on every run")
	optString(fs, &spec.DeliverTo, "deliver-to", "create: webhook:<url>, slack:<channel>, … or none (default)")
	optString(fs, &spec.Missed, "missed", "create: skip (default) or once")
	disabled := fs.Bool("disabled", false, "create: create it switched off")
	if err := fs.Parse(reorder(rest)); err != nil {
		return &usageError{err.Error()}
	}
	needID := func() (string, error) {
		if fs.NArg() < 1 || (sub != "run" && fs.NArg() > 1) {
			return "", &usageError{fmt.Sprintf("routines %s: give exactly one routine id", sub)}
		}
		return url.PathEscape(fs.Arg(0)), nil
	}
	switch sub {
	case "list":
		return listRoutines(ctx, c, stdout)
	case "create":
		if fs.NArg() > 0 {
			return &usageError{"routines create: give the routine with flags (--id, --agent, --schedule, --input, …), not arguments"}
		}
		if *disabled {
			spec.Enabled = new(bool)
		}
		var r core.Routine
		body := struct {
			ID string `json:"id"`
			core.RoutineSpec
		}{*newID, spec}
		if err := c.do(ctx, "POST", "/api/v1/routines", body, &r); err != nil {
			return err
		}
		if r.Enabled {
			fmt.Fprintf(stdout, "routine %s created; next run %s\n", r.ID, when(r.NextFireAt))
		} else {
			fmt.Fprintf(stdout, "routine %s created, disabled (agentgate routines enable %s)\n", r.ID, r.ID)
		}
		return nil
	case "delete":
		id, err := needID()
		if err != nil {
			return err
		}
		if err := c.do(ctx, "DELETE", "/api/v1/routines/"+id, nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "routine %s deleted; its history stays\n", fs.Arg(0))
		return nil
	case "run":
		id, err := needID()
		if err != nil {
			return err
		}
		var run apiRun
		body := map[string]string{"input": strings.Join(fs.Args()[1:], " ")}
		if err := c.do(ctx, "POST", "/api/v1/routines/"+id+"/trigger", body, &run); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "routine %s started run %s (%s)\nfollow it: agentgate runs show %s\n", fs.Arg(0), run.ID, run.Status, run.ID)
		return nil
	case "enable", "disable":
		id, err := needID()
		if err != nil {
			return err
		}
		var r core.Routine
		if err := c.do(ctx, "POST", "/api/v1/routines/"+id+"/"+sub, nil, &r); err != nil {
			return err
		}
		if r.Enabled {
			fmt.Fprintf(stdout, "routine %s is enabled; next run %s\n", r.ID, when(r.NextFireAt))
		} else {
			fmt.Fprintf(stdout, "routine %s is disabled\n", r.ID)
		}
		return nil
	case "history":
		id, err := needID()
		if err != nil {
			return err
		}
		return routineHistory(ctx, c, id, *limit, stdout)
	}
	fmt.Fprint(stderr, routinesHelp)
	return &usageError{fmt.Sprintf("routines: unknown subcommand %q (list, create, run, enable, disable, delete, history)", sub)}
}

// optString defines a string flag that sets *dst only when given.
func optString(fs *flag.FlagSet, dst **string, name, usage string) {
	fs.Func(name, usage, func(v string) error {
		*dst = &v
		return nil
	})
}

// when formats an optional time in local time.
func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

func listRoutines(ctx context.Context, c *client, stdout io.Writer) error {
	items, err := allPages[core.Routine](ctx, c, "/api/v1/routines?cursor=")
	if err != nil {
		return err
	}
	if len(items) == 0 {
		fmt.Fprintln(stdout, "no routines (add them under routines: in the config file, or with agentgate routines create)")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAGENT\tSCHEDULE\tTIMEZONE\tSTATUS\tNEXT RUN\tLAST RUN\tDELIVER TO\tSOURCE")
	for _, r := range items {
		status := "enabled"
		if !r.Enabled {
			status = "disabled"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.AgentID, r.Schedule, r.Timezone, status,
			when(r.NextFireAt), when(r.LastFireAt), r.DeliverTo, r.Source)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range items {
		if r.DisabledReason != "" {
			fmt.Fprintf(stdout, "%s: %s (agentgate routines enable %s)\n", r.ID, r.DisabledReason, r.ID)
		}
	}
	return nil
}

func routineHistory(ctx context.Context, c *client, id string, limit int, stdout io.Writer) error {
	items, err := allPages[core.RoutineEntry](ctx, c, "/api/v1/routines/"+id+"/runs?limit=500&cursor=")
	if err != nil {
		return err
	}
	if len(items) == 0 {
		fmt.Fprintln(stdout, "no history yet")
		return nil
	}
	if limit > 0 && len(items) > limit {
		items = items[len(items)-limit:]
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECORDED\tKIND\tDUE\tRUN\tSTATUS\tDELIVERY")
	for _, e := range items {
		run, status := e.RunID, string(e.RunStatus)
		if run == "" {
			run, status = "-", "-"
		}
		detail := e.Delivery
		if e.Note != "" {
			detail = strings.TrimSpace(detail + " " + e.Note)
		}
		if e.DisabledRoutine {
			detail = strings.TrimSpace(detail + " (this failure disabled the routine)")
		}
		if detail == "" {
			detail = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.FiredAt.Local().Format(time.DateTime), e.Kind, when(e.DueAt), run, status, detail)
	}
	return tw.Flush()
}
