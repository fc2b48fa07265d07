package slack

import "github.com/agentgate/agentgate/interfaces/chat"

// Slack's limits for what we post. Lengths are counted in UTF-16 code units,
// which is never less than Slack's character count.
const (
	MaxSectionText = 3000   // a section block's text
	MaxMessageText = 40_000 // a message's text; Slack truncates beyond it
	MaxBlocks      = 50     // blocks in one message
)

// minLimit is the smallest limit Split takes: room for a code block's
// fences around a little text.
const minLimit = 16

// Split cuts text into chunks of at most limit characters as Slack counts
// them (UTF-16 code units), at a line break, else a space, else anywhere,
// closing a ``` code block open at a cut and opening it again in the next
// chunk (chat.Split). Limits below 16 are raised to 16.
func Split(text string, limit int) []string {
	return chat.Split(text, max(limit, minLimit), chat.UTF16)
}

// Messages splits mrkdwn text for posting as section blocks: each inner
// slice is one message's section texts, at most MaxBlocks sections of at most
// MaxSectionText characters and MaxMessageText characters in all.
func Messages(text string) [][]string {
	var msgs [][]string
	var cur []string
	total := 0
	for _, s := range Split(text, MaxSectionText) {
		n := textLen(s)
		if len(cur) > 0 && (len(cur) == MaxBlocks || total+n > MaxMessageText) {
			msgs = append(msgs, cur)
			cur, total = nil, 0
		}
		cur = append(cur, s)
		total += n
	}
	if len(cur) > 0 {
		msgs = append(msgs, cur)
	}
	return msgs
}

func textLen(s string) int {
	n := 0
	for _, r := range s {
		n += chat.UTF16(r)
	}
	return n
}
