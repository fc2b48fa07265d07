package main

import (
	"context"
	"errors"
	"io"

	"github.com/agentgate/agentgate/internal/bench"
)

// benchCmd runs `agentgate bench …` and `agentgate bench slack-ingest …`;
// the harness lives in internal/bench. Its flag mistakes exit with code 2,
// like every command's.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := bench.Main(ctx, args, stdout, stderr)
	if ue := (*bench.UsageError)(nil); errors.As(err, &ue) {
		return &usageError{ue.Error()}
	}
	return err
}
