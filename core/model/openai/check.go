package openai

import (
	"context"
	"errors"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentgate/agentgate/core"
)

var _ core.ModelChecker = (*Model)(nil)

// Check asks the API for the model (GET /models/{model}, free and not
// retried). A refused key is core.ErrModelRefused; so is an unknown model on
// OpenAI's own API, but not on a compatible server given by BaseURL, where
// the route may be missing or names be loose (llama.cpp takes any).
func (m *Model) Check(ctx context.Context) error {
	_, err := m.client.Models.Get(ctx, m.model, option.WithMaxRetries(0))
	if err == nil {
		return nil
	}
	status := 0
	if apiErr, ok := errors.AsType[*openai.Error](err); ok {
		status = apiErr.StatusCode
	}
	return core.CheckFailure(status, m.ownAPI, m.model, m.wrap(err))
}
