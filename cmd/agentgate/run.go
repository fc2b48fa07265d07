package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	gw "github.com/agentgate/agentgate/gateway"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

// usageError is a mistake on the command line (exit code 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// exitCode is 2 for a usage error (the command line's, or a setting the
// gateway refuses), else 1.
func exitCode(err error) int {
	var ue *usageError
	var gue *gw.UsageError
	if errors.As(err, &ue) || errors.As(err, &gue) {
		return 2
	}
	return 1
}

const usage = `agentgate — a durable gateway between AI agents and the chat tools teams use.

Usage:
  agentgate serve [--config FILE] [--addr HOST:PORT] [--data-dir DIR]
  agentgate migrate [--down-to N] [--data-dir DIR]
  agentgate config check [--config FILE] [--offline]   validate the config and the model keys, then exit
  agentgate backup [--data-dir DIR] FILE         copy the embedded store while it serves
  agentgate version
  agentgate health [--url URL]                   exit 0 when the gateway answers /readyz (a HEALTHCHECK)
  agentgate doctor [--json]                      check the config, keys, tokens, store and Redis, then exit
  agentgate chat AGENT [--session ID] [--user NAME]
  agentgate approvals list [--status pending|approved|denied|expired|cancelled|all]
  agentgate approvals approve ID [--reason TEXT]
  agentgate approvals deny ID [--reason TEXT]
  agentgate audit [--principal P] [--action A] [--target ID] [--route R] [--since TIME] [--limit N]
  agentgate runs show ID
  agentgate jobs list|retry ID                   dead-lettered jobs (admin)
  agentgate routines list|run ID [INPUT]|enable ID|disable ID|history ID
  agentgate bench [--quick] [--markdown] [--replicas N] [--database-url URL --redis-url URL]
  agentgate bench slack-ingest [--quick] [--markdown] [--duration D] [--clients N]
  agentgate mcp [--server URL --api-key KEY]   MCP over stdio (Claude Desktop, Claude Code, Cursor)

Client commands (chat, approvals, runs, routines, audit) talk to a running gateway:
  --server URL   (env AGENTGATE_URL, default http://127.0.0.1:8080)
  --api-key KEY  (env AGENTGATE_API_KEY)

Run 'agentgate serve --help' for the server's settings.
`

// run is the whole program; main only wires the process to it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &usageError{"a command is required"}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serve(ctx, rest, stdout, stderr)
	case "migrate":
		return migrate(ctx, rest, stdout, stderr)
	case "backup":
		return backupCmd(ctx, rest, stdout, stderr)
	case "jobs":
		return jobsCmd(ctx, rest, termSafe{stdout}, termSafe{stderr})
	case "health":
		return healthCmd(ctx, rest, stdout, stderr)
	case "doctor":
		return doctorCmd(ctx, rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "agentgate", buildVersion())
		return nil
	// What the gateway sent reaches the terminal escaped (termSafe).
	case "chat":
		return chat(ctx, rest, stdin, termSafe{stdout}, termSafe{stderr})
	case "approvals":
		return approvalsCmd(ctx, rest, termSafe{stdout}, termSafe{stderr})
	case "runs":
		return runsCmd(ctx, rest, termSafe{stdout}, termSafe{stderr})
	case "audit":
		return auditCmd(ctx, rest, termSafe{stdout}, termSafe{stderr})
	case "routines":
		return routinesCmd(ctx, rest, termSafe{stdout}, termSafe{stderr})
	case "config":
		return configCmd(ctx, rest, stdout, stderr)
	case "bench":
		return benchCmd(ctx, rest, stdout, stderr)
	case "mcp":
		return mcpCmd(ctx, rest, stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return &usageError{fmt.Sprintf("unknown command %q", cmd)}
}

// buildVersion is version with the module and Go versions of the build.
func buildVersion() string { return gw.BuildVersion(version) }
