package chat

import (
	"context"
	"errors"
	"sync"

	"github.com/agentgate/agentgate/core"
)

// RunInbox runs a chat adapter's inbox writer and processor until ctx ends
// (or one of them fails, which stops the other): the writer stores what the
// adapter accepts, the processor starts the runs in arrival order.
func RunInbox(ctx context.Context, w *core.InboxWriter, p *core.InboxProcessor) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, start := range []func(context.Context) error{w.Start, p.Start} {
		wg.Go(func() {
			if errs[i] = start(ctx); errs[i] != nil {
				cancel() // one without the other is no use
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
