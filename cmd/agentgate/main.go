// Command agentgate is the gateway: `agentgate serve` runs it; the other
// commands talk to a running gateway or manage its store.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentgate:", err)
		os.Exit(exitCode(err))
	}
}
