package slack

import (
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"
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
			for _, sections := range Messages(Mrkdwn(replyText(run))) {
				payload = append(payload, map[string]any{
					"text":   strings.Join(sections, "\n\n"),
					"blocks": sectionBlocks(sections),
				})
			}
			goldenJSON(t, name, payload)
		})
	}
}
