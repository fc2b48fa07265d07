package telegram

import (
	"strings"
	"unicode/utf16"
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

// Split cuts text into parts of at most max UTF-16 code units (as Telegram
// counts), at the last line break of a part when there is one in its second
// half, else at the last space there, else anywhere between two characters.
// Empty parts are dropped.
func Split(text string, max int) []string {
	if max <= 0 {
		max = MaxMessageLen
	}
	var parts []string
	for text != "" {
		cut, units, lastNL, lastSP := len(text), 0, -1, -1
		for i, r := range text {
			n := utf16.RuneLen(r)
			if n < 0 {
				n = 1
			}
			if units+n > max {
				cut = i
				break
			}
			units += n
			switch {
			case r == '\n' && units > max/2:
				lastNL = i
			case r == ' ' && units > max/2:
				lastSP = i
			}
		}
		if cut < len(text) {
			switch {
			case lastNL > 0:
				cut = lastNL + 1
			case lastSP > 0:
				cut = lastSP + 1
			}
		}
		if p := strings.TrimRight(text[:cut], " \n"); p != "" {
			parts = append(parts, p)
		}
		text = text[cut:]
	}
	return parts
}
