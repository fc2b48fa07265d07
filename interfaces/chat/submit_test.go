package chat_test

import (
	"errors"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

func TestSubmitOutcome(t *testing.T) {
	t.Parallel()
	var perm *core.PermanentError
	other := errors.New("store down")
	for name, tc := range map[string]struct {
		err  error
		want func(error) bool
	}{
		"input":         {&core.InputError{Msg: "empty"}, func(e error) bool { return errors.Is(e, core.ErrInboxSkip) }},
		"agent gone":    {core.ErrNotFound, func(e error) bool { return errors.As(e, &perm) }},
		"other session": {core.ErrSessionAgent, func(e error) bool { return errors.As(e, &perm) }},
		"retry":         {other, func(e error) bool { return e == other }},
	} {
		t.Run(name, func(t *testing.T) {
			if got := chat.SubmitOutcome(tc.err); !tc.want(got) {
				t.Fatalf("SubmitOutcome(%v) = %v", tc.err, got)
			}
		})
	}
}
