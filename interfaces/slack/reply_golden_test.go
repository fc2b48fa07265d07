package slack

import (
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// TestReplyPayloadGolden pins the blocks a finished run's answer is posted
// with: Markdown turned into mrkdwn sections, a long answer split into
// several messages, a failure as one short line.
func TestReplyPayloadGolden(t *testing.T) {
	long := strings.Repeat("The deploy of **web** went fine. ", 120) // > 3,000 characters: two sections
	cases := map[string]core.Run{
		"reply_completed": {Status: core.RunCompleted, Output: "## Done\nDeployed **web** to `staging`; see [the log](https://ci.example/42).\n\n- step one\n- step two"},
		"reply_long":      {Status: core.RunCompleted, Output: long},
		"reply_failed":    {Status: core.RunFailed, Error: "gave up after 5 attempts: model: 401 invalid api key\nstack…"},
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			var payload []map[string]any
			for _, sections := range Messages(Mrkdwn(chat.ReplyText(run))) {
				payload = append(payload, map[string]any{
					"text":   strings.Join(sections, "\n\n"),
					"blocks": sectionBlocks(sections),
				})
			}
			goldenJSON(t, name, payload)
		})
	}
}

// TestLiveReplyPayloadGolden pins what a live reply sends besides the
// model's own Markdown: the placeholder posted where Slack refuses to
// stream, and the notes that end a live reply on a pause or a cancellation
// (appended to a stream, or edited into a posted message).
func TestLiveReplyPayloadGolden(t *testing.T) {
	t.Parallel()
	said := "Deploying **web** to `staging`."
	edit := func(note string) map[string]any {
		text, blocks := firstMessage(chat.JoinNote(said, note))
		return map[string]any{"text": text, "blocks": blocks}
	}
	goldenJSON(t, "reply_live", map[string]any{
		"thinking":         map[string]any{"text": thinkingNote, "blocks": thinkingBlocks()},
		"paused_stream":    map[string]any{"markdown_text": chat.JoinNote(said, chat.NotePaused)[len(said):]},
		"paused_edit":      edit(chat.NotePaused),
		"cancelled_stream": map[string]any{"markdown_text": chat.JoinNote(said, chat.NoteCancelled)[len(said):]},
		"cancelled_edit":   edit(chat.NoteCancelled),
	})
}
