package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"

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
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		switch {
		case apiErr.StatusCode == http.StatusUnauthorized || apiErr.StatusCode == http.StatusForbidden:
			return core.ModelRefused("the API key was refused", m.wrap(err))
		case apiErr.StatusCode == http.StatusNotFound && m.ownAPI:
			return core.ModelRefused(fmt.Sprintf("no model named %q", m.model), m.wrap(err))
		}
	}
	if err != nil {
		return m.wrap(err)
	}
	return nil
}
