package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

const healthHelp = `Usage: agentgate health [--url URL]

Asks a gateway's GET /readyz (no key needed) and exits 0 when it is ready,
1 with the reason when not: a container's HEALTHCHECK. The default URL is
the listen address serve would use (AGENTGATE_ADDR, default
127.0.0.1:8080), with 0.0.0.0 or :: read as 127.0.0.1.
`

// healthCmd runs `agentgate health`.
func healthCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, healthHelp) }
	target := fs.String("url", "", "the gateway's base URL")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return &usageError{err.Error()}
	}
	if *target == "" {
		*target = "http://" + localAddr(envOr("AGENTGATE_ADDR", "127.0.0.1:8080"))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(*target, "/")+"/readyz", nil)
	if err != nil {
		return &usageError{fmt.Sprintf("health: --url: %v", err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health: not reachable: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: not ready (%d): %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	fmt.Fprintln(stdout, "ready")
	return nil
}

// localAddr is addr as a client on this host dials it: an unspecified host
// (0.0.0.0, ::, empty) becomes 127.0.0.1.
func localAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
