package chat

import (
	"errors"
	"fmt"

	"github.com/agentgate/agentgate/core"
)

// SubmitOutcome turns the error of Engine.Submit for an inbox message into
// what a core.InboxHandler returns: input the agent cannot take needs no
// run (ErrInboxSkip), an agent that is gone or a session of another agent
// will never run (PermanentError), anything else is retried.
func SubmitOutcome(err error) error {
	var inputErr *core.InputError
	switch {
	case errors.As(err, &inputErr):
		return fmt.Errorf("%v: %w", err, core.ErrInboxSkip)
	case errors.Is(err, core.ErrNotFound), errors.Is(err, core.ErrSessionAgent):
		return core.Permanent(err)
	}
	return err
}
