package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentgate/agentgate/core"
)

var _ core.ModelChecker = (*Model)(nil)

// Check asks the API for the model (GET /v1/models/{model}, free and not
// retried). A refused key is core.ErrModelRefused; so is an unknown model on
// Anthropic's own API, but not behind a BaseURL (a proxy or gateway may not
// serve the route).
func (m *Model) Check(ctx context.Context) error {
	_, err := m.client.Models.Get(ctx, m.model, anthropic.ModelGetParams{}, option.WithMaxRetries(0))
	var apiErr *anthropic.Error
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
