// Package fallback is a core.Model that answers with the first of several
// models that works: when a model fails (after its own retries) before it
// has streamed any text, the next one is asked the same request.
package fallback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/agentgate/agentgate/core"
)

// Named is one model of the list and the name logs and errors give it,
// like "openai/gpt-4o-mini".
type Named struct {
	Name  string
	Model core.Model
}

// Model asks Models in order.
type Model struct {
	Models []Named
	Logger *slog.Logger // nil: slog.Default()
}

var _ core.Model = (*Model)(nil)

// Generate asks each model in turn until one answers. Once a model has
// streamed text, its failure is returned as is: the step is retried rather
// than the text shown twice. A cancelled ctx stops at once.
func (m *Model) Generate(ctx context.Context, req core.ModelRequest, onDelta func(text string)) (core.ModelResponse, error) {
	var errs []error
	for i, n := range m.Models {
		streamed := false
		resp, err := n.Model.Generate(ctx, req, func(text string) {
			streamed = true
			if onDelta != nil {
				onDelta(text)
			}
		})
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
		if streamed || ctx.Err() != nil {
			return resp, errors.Join(errs...)
		}
		if i+1 < len(m.Models) {
			m.logger().Warn("model failed, trying the next one", "model", n.Name, "next", m.Models[i+1].Name, "err", err)
		}
	}
	return core.ModelResponse{}, errors.Join(errs...)
}

func (m *Model) logger() *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.Default()
}
