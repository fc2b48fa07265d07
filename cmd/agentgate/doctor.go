package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/redis/go-redis/v9"

	gw "github.com/agentgate/agentgate/gateway"
)

// quiet drops go-redis's own log lines.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

const doctorHelp = `Usage: agentgate doctor [--json] [serve's settings: --config, --data-dir, …]

Checks, without starting a gateway or changing anything, what serve needs:
the config, each agent's model provider and key, each chat platform's token
(Slack auth.test, Telegram getMe, Discord users/@me), the store (reachable,
migrated, the clock beside PostgreSQL's), Redis, and the data dir (writable,
not locked). One line per check; exits 1 when one fails. --json prints the
checks as a JSON array of {name, status, detail, fix}.
`

// doctorCmd runs `agentgate doctor`.
func doctorCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		fmt.Fprint(stdout, doctorHelp)
		return nil
	}
	s, err := parseSettings("doctor", args, stderr)
	if err != nil {
		return err
	}
	redis.SetLogger(quiet{}) // its pool logs each failed dial; the redis line says it once
	checks := gw.Doctor(ctx, s.Settings)
	failed := 0
	for _, c := range checks {
		if c.Status == gw.CheckFail {
			failed++
		}
	}
	if s.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(checks); err != nil {
			return err
		}
	} else {
		for _, c := range checks {
			line := fmt.Sprintf("%-4s  %-16s %s", c.Status, c.Name, c.Detail)
			if c.Fix != "" {
				line += "\n      fix: " + c.Fix
			}
			fmt.Fprintln(stdout, line)
		}
	}
	if failed > 0 {
		return fmt.Errorf("doctor: %d %s failed", failed, plural(failed, "check", "checks"))
	}
	return nil
}
