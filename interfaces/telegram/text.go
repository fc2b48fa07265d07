package telegram

import (
	"strings"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// MaxMessageLen is Telegram's limit on a message's text, in UTF-16 code
// units after entity parsing.
const MaxMessageLen = 4096

// markdownV2Special are the characters MarkdownV2 requires escaped anywhere
// outside entities: https://core.telegram.org/bots/api#markdownv2-style.
// The backslash itself is one of them (go-telegram/bot's EscapeMarkdown
// misses it).
const markdownV2Special = "\\_*[]()~`>#+-=|{}.!"

// Escape escapes s for parse_mode MarkdownV2, so it shows as written.
func Escape(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	for _, r := range s {
		if strings.ContainsRune(markdownV2Special, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Split cuts text (Markdown) into parts of at most max UTF-16 code units,
// as Telegram counts (chat.Split).
func Split(text string, max int) []string {
	if max <= 0 {
		max = MaxMessageLen
	}
	return chat.Split(text, max, chat.UTF16)
}
