package slack

import (
	"context"
	"strconv"
	"strings"

	slackapi "github.com/slack-go/slack"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Reply implements chat.Platform: one Slack message per chunk of the
// answer. Each chunk goes through the outbox: the intent is recorded before
// chat.postMessage and the ts after it. A retried job skips the chunks
// already sent, and never posts again a chunk whose earlier outcome is
// unknown (it is marked uncertain and logged): a missing chunk is better
// than a doubled answer. When the run showed live, its live message is
// edited into the first chunk instead. Files the run's tools returned are
// uploaded below it (files.uploadV2), each once. An error retries the job.
func (c *Notifier) Reply(ctx context.Context, a chat.Answer) error {
	live, isLive := parseLiveRef(a.Live)
	for i, sections := range Messages(Mrkdwn(a.Text)) {
		key := "slack:reply:" + a.Run.ID + ":" + strconv.Itoa(i)
		body, blocks := strings.Join(sections, "\n\n"), sectionBlocks(sections)
		var err error
		if i == 0 && isLive {
			err = c.finalize(ctx, key, a.Binding, live, body, blocks)
		} else {
			_, err = c.postOnce(ctx, key, a.Binding.Channel, a.Binding.Thread, body, blocks)
		}
		if err != nil {
			return err
		}
	}
	b := a.Binding
	return c.Sender.Upload(ctx, "slack:reply:"+a.Run.ID, a.Files, chat.Uploads{File: func(ctx context.Context, f core.File) (string, error) {
		return "", c.Client.Upload(ctx, b.Channel, b.Thread, f.Name, f.Name, f.Data)
	}})
}

func sectionBlocks(sections []string) []slackapi.Block {
	blocks := make([]slackapi.Block, len(sections))
	for i, s := range sections {
		blocks[i] = slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, s, false, false), nil, nil)
	}
	return blocks
}
