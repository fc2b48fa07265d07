package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/agentgate/agentgate/core/config"
	gw "github.com/agentgate/agentgate/gateway"
)

const configHelp = `Usage: agentgate config check [--config FILE] [--offline]

Loads and validates the config the way serve does (--config, else
AGENTGATE_CONFIG, else the built-in demo agent; ${VAR} from the environment),
then asks each agent's model provider whether it accepts the key and knows
the model (--offline: not), without opening the store. Prints one line per
problem and exits 1, or prints a summary and exits 0; a provider that cannot
be reached is a warning.
`

// configCmd runs `agentgate config check`.
func configCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprint(stderr, configHelp)
		return &usageError{"config: the only subcommand is check"}
	}
	if slices.ContainsFunc(args[1:], func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		fmt.Fprint(stdout, configHelp)
		return nil
	}
	s, err := parseSettings("config check", args[1:], stderr)
	if err != nil {
		return err
	}
	name := "the built-in demo config"
	if s.ConfigPath != "" {
		name = s.ConfigPath
	}
	cfg, problems := gw.CheckConfig(s.Settings)
	if len(problems) == 0 && !s.offline {
		var warnings []string
		problems, warnings = gw.CheckModels(ctx, cfg)
		for _, w := range warnings {
			fmt.Fprintln(stdout, "warning: "+w)
		}
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stdout, p)
		}
		return fmt.Errorf("config check: %d %s in %s", len(problems), plural(len(problems), "problem", "problems"), name)
	}
	mcp := ""
	if len(cfg.MCPServers) > 0 {
		mcp = ", MCP servers: " + strings.Join(slices.Sorted(maps.Keys(cfg.MCPServers)), ", ")
	}
	fmt.Fprintf(stdout, "config ok: %s: %s, %s, %s%s, platforms: %s\n", name,
		count(len(cfg.Agents), "agent"), count(len(cfg.Tools), "tool"), count(len(cfg.Routines), "routine"), mcp, platforms(cfg))
	return nil
}

func count(n int, what string) string { return fmt.Sprintf("%d %s", n, plural(n, what, what+"s")) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// platforms lists the chat platforms the config turns on.
func platforms(cfg *config.Config) string {
	var ps []string
	if cfg.Interfaces.Slack != nil {
		ps = append(ps, "slack")
	}
	if cfg.Interfaces.Telegram != nil {
		ps = append(ps, "telegram")
	}
	if cfg.Interfaces.Discord != nil {
		ps = append(ps, "discord")
	}
	if len(ps) == 0 {
		return "none"
	}
	return strings.Join(ps, ", ")
}
