package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	imcp "github.com/agentgate/agentgate/interfaces/mcp"
)

const mcpHelp = `Usage: agentgate mcp [--server URL --api-key KEY] [serve's flags]

Serves MCP over stdio, for clients that launch a command (Claude Desktop,
Claude Code, Cursor). Logs go to stderr.

With --server (env AGENTGATE_URL) it relays to that running gateway's /mcp,
with --api-key (env AGENTGATE_API_KEY). Without, it runs a gateway of its own
in this process (serve's settings apply; --addr defaults to a free loopback
port, and --data-dir to agentgate in your user config directory, since MCP
clients start commands in a directory of their choosing). With no API key
set (--api-key, AGENTGATE_API_KEYS or server.api_keys), that gateway answers
this process alone: it is locked with a key made at start that only this
process holds. Do not point it at the data dir of a gateway that is running:
give that gateway's --server.
`

// mcpCmd serves MCP over stdio: relayed to a running gateway, or to one
// started in this process.
func mcpCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	server := fs.String("server", os.Getenv("AGENTGATE_URL"), "gateway URL")
	key := fs.String("api-key", os.Getenv("AGENTGATE_API_KEY"), "API key")
	help := fs.Bool("help", false, "")
	fs.BoolVar(help, "h", false, "")
	// The rest are serve's flags, for the gateway run in this process.
	var serveArgs []string
	for _, name := range []string{"config", "addr", "data-dir", "node-id", "log-level"} {
		fs.Func(name, "", func(v string) error { serveArgs = append(serveArgs, "--"+name, v); return nil })
	}
	if err := fs.Parse(args); err != nil {
		return &usageError{"mcp: " + err.Error() + "\n" + mcpHelp}
	}
	if *help {
		fmt.Fprint(stdout, mcpHelp)
		return nil
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("mcp takes no arguments, got %q", fs.Args())}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if *server != "" {
		if len(serveArgs) > 0 {
			return &usageError{"mcp: --server relays to a running gateway; serve's flags (" + strings.Join(serveArgs, " ") + ") do not apply"}
		}
		b := &imcp.Bridge{URL: strings.TrimRight(*server, "/") + "/mcp", APIKey: *key, Logger: log}
		return b.Serve(ctx, stdin, stdout)
	}
	return mcpEmbedded(ctx, serveArgs, *key, stdin, stdout, stderr, log)
}

// mcpEmbedded runs serve in this process on a loopback port and relays
// stdio to its /mcp.
func mcpEmbedded(ctx context.Context, serveArgs []string, key string, stdin io.Reader, stdout, stderr io.Writer, log *slog.Logger) error {
	if !slices.Contains(serveArgs, "--addr") && os.Getenv("AGENTGATE_ADDR") == "" {
		serveArgs = append(serveArgs, "--addr", "127.0.0.1:0")
	}
	if !slices.Contains(serveArgs, "--data-dir") && os.Getenv("AGENTGATE_DATA_DIR") == "" {
		dir, err := os.UserConfigDir()
		if err != nil {
			return fmt.Errorf("mcp: no user config directory for the data (%v); set --data-dir", err)
		}
		serveArgs = append(serveArgs, "--data-dir", filepath.Join(dir, "agentgate"))
	}
	if key == "" {
		key, _, _ = strings.Cut(os.Getenv("AGENTGATE_API_KEYS"), ",")
		key = strings.TrimSpace(key)
	}
	// With no key given, the gateway is locked with one only this process
	// holds: open on loopback, any local user or process could drive it
	// (and approve its runs). The gateway ignores it if the config has keys.
	localKey := ""
	if key == "" {
		localKey = rand.Text() + rand.Text()
		key = localKey
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// serve tells where it listens on its stdout; everything it prints goes
	// to stderr, as stdout carries the MCP messages.
	pr, pw := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- serveLocal(ctx, serveArgs, localKey, pw, stderr)
		pw.Close()
	}()
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if u, ok := strings.CutPrefix(line, "agentgate listening on "); ok {
				url <- u
			}
			fmt.Fprintln(stderr, line)
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	var base string
	select {
	case base = <-url:
	case err := <-served:
		if err == nil {
			err = errors.New("mcp: the gateway stopped before it listened")
		}
		return err
	}
	b := &imcp.Bridge{URL: base + "/mcp", APIKey: key, Logger: log}
	err := b.Serve(ctx, stdin, stdout)
	cancel()
	if serr := <-served; serr != nil && err == nil {
		err = serr
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
