package slack

import "context"

// InteractConfig is what approval clicks and slash commands need.
type InteractConfig struct{}

func (h *Handler) action(ctx context.Context, req Request) error { return nil }

func (h *Handler) command(ctx context.Context, req Request) (any, error) { return nil, nil }
