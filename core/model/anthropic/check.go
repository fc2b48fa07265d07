package anthropic

import (
	"context"
	"errors"

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
	if err == nil {
		return nil
	}
	status := 0
	if apiErr, ok := errors.AsType[*anthropic.Error](err); ok {
		status = apiErr.StatusCode
	}
	return core.CheckFailure(status, m.ownAPI, m.model, m.wrap(err))
}
