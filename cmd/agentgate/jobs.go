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

const jobsHelp = `Usage:
  agentgate jobs list [--limit N]   dead-lettered jobs (failed every attempt), oldest first
  agentgate jobs retry ID           send a dead-lettered job again, its attempts counted anew

Both need an admin key. A dead chat.reply job is an answer that never reached
its chat (the platform was down or refused it); retried, it is posted once.
`

// jobsCmd runs `agentgate jobs list|retry`.
func jobsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "retry") {
		fmt.Fprint(stderr, jobsHelp)
		return &usageError{"jobs: give list or retry ID"}
	}
	fs := flag.NewFlagSet("jobs "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := clientFlags(fs)
	limit := fs.Int("limit", 100, "jobs to show (1-500)")
	if err := fs.Parse(reorder(args[1:])); err != nil {
		return &usageError{err.Error()}
	}
	if args[0] == "retry" {
		if fs.NArg() != 1 {
			return &usageError{"jobs retry: give one job id (see agentgate jobs list)"}
		}
		var j core.Job
		if err := c.do(ctx, "POST", "/api/v1/jobs/"+url.PathEscape(fs.Arg(0))+"/retry", nil, &j); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "retrying %s (%s): due now\n", j.ID, j.Kind)
		return nil
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("jobs list takes no arguments, got %q", fs.Args())}
	}
	var page core.Page[core.Job]
	if err := c.do(ctx, "GET", fmt.Sprintf("/api/v1/jobs?status=dead&limit=%d", *limit), nil, &page); err != nil {
		return err
	}
	if len(page.Items) == 0 {
		fmt.Fprintln(stdout, "no dead-lettered jobs")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tCREATED\tATTEMPTS\tLAST ERROR\tPAYLOAD")
	for _, j := range page.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, j.Kind, j.CreatedAt.Local().Format(time.DateTime), j.Attempt,
			clip(j.LastError, 80), clip(string(j.Payload), 80))
	}
	return tw.Flush()
}

// clip shortens s to n characters on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
