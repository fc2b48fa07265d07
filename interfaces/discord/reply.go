package discord

import (
	"context"
	"errors"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

var (
	_ chat.Platform = (*Notifier)(nil)
	_ chat.Typer    = (*Notifier)(nil)
)

// Reply implements chat.Platform: one message per 2,000 characters, each
// through the outbox (a retried job skips the parts already sent and never
// posts again a part whose outcome is unknown). When the run showed live,
// the live message is edited into the first part. Files the run's tools
// returned follow as attachments, each once. An error retries the job.
func (n *Notifier) Reply(ctx context.Context, a chat.Answer) error {
	parts := Split(a.Text, MaxMessage)
	key, channel := "discord:reply:"+a.Run.ID, a.Binding.Channel
	for i, part := range parts {
		var err error
		if i == 0 && a.Live != "" { // the live message becomes the first part
			err = n.Sender.Finalize(ctx, key+":0", a.Live, func(ctx context.Context) error {
				err := n.Client.Edit(ctx, channel, a.Live, Message{Content: part})
				var rerr *discordgo.RESTError
				if errors.As(err, &rerr) && rerr.Message != nil && rerr.Message.Code == discordgo.ErrCodeUnknownMessage {
					n.Logger.Warn("discord live reply was deleted; posting the answer anew", "run", a.Run.ID)
					return fmt.Errorf("%w: %w", chat.ErrGone, err)
				}
				return err
			}, func(ctx context.Context) (string, error) {
				return n.Client.Post(ctx, channel, Message{Content: part})
			})
		} else {
			_, err = n.postOnce(ctx, key+":"+itoa(i), channel, Message{Content: part})
		}
		if err != nil {
			return err
		}
	}
	return n.Sender.Upload(ctx, key, a.Files, chat.Uploads{
		File: func(ctx context.Context, f core.File) (string, error) {
			return n.Client.PostFile(ctx, channel, f.Name, f.Data, "")
		},
		Max: MaxUpload,
		Note: func(ctx context.Context, text string) (string, error) {
			return n.Client.Post(ctx, channel, Message{Content: inline(text)}) // the name is the tool's: shown as text
		},
	})
}
