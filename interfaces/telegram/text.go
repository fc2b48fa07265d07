package telegram

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
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

// Split cuts text (Markdown) into parts of at most max UTF-16 code units
// (as Telegram counts), at the last line break of a part when there is one
// in its second half, else at the last space there, else anywhere between
// two characters. A fenced code block open at a cut is closed at the end of
// its part and opened again, with its language, at the start of the next,
// so each part renders on its own (Markdown). Empty parts are dropped.
func Split(text string, max int) []string {
	if max <= 0 {
		max = MaxMessageLen
	}
	var parts []string
	for text != "" {
		cut, reopen := cutAt(text, max)
		p, rest := strings.TrimRight(text[:cut], " \n"), text[cut:]
		if reopen != "" {
			p += fenceClose
			if line, after, _ := strings.Cut(rest, "\n"); strings.HasPrefix(strings.TrimSpace(line), "```") {
				rest = after // the block ends there: closed already
			} else {
				rest = reopen + rest
			}
		}
		if p != "" {
			parts = append(parts, p)
		}
		text = rest
	}
	return parts
}

// cutAt is where Split cuts text for a part of at most max units and,
// when the part ends inside a fenced code block, the fence that opens the
// block again in the next part (the part then has room to close it).
func cutAt(text string, max int) (cut int, reopen string) {
	cut = splitPoint(text, max)
	if cut == len(text) {
		return cut, ""
	}
	if _, _, open := openFence(text[:cut]); !open {
		return cut, ""
	}
	short := splitPoint(text, max-len(fenceClose))
	start, lang, open := openFence(text[:short])
	switch {
	case !open:
		return short, ""
	case len(fenceOpen(lang))+len(fenceClose) > max/2:
		return cut, "" // no room to close and reopen it (a tiny max)
	case start > 0 && !strings.Contains(strings.TrimRight(text[start:short], " \n"), "\n"):
		return start, "" // nothing of the block yet: it starts the next part
	}
	return short, fenceOpen(lang)
}

// fenceClose closes a fenced code block at the end of a part.
const fenceClose = "\n```"

// fenceOpen opens a fenced code block of lang.
func fenceOpen(lang string) string { return "```" + lang + "\n" }

// openFence reports whether s ends inside a fenced code block, as Markdown
// reads fences (a line starting with ``` opens one, the next such line
// closes it), and where that block's opening line starts and its language.
func openFence(s string) (start int, lang string, open bool) {
	for i := 0; i < len(s); {
		line, _, _ := strings.Cut(s[i:], "\n")
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") {
			if open = !open; open {
				start, lang = i, fenceLang.FindString(strings.TrimPrefix(t, "```"))
			}
		}
		i += len(line) + 1
	}
	return start, lang, open
}

// splitPoint is where Split cuts text for a part of at most max units:
// len(text) when all of it fits.
func splitPoint(text string, max int) int {
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
	switch {
	case cut == len(text):
	case lastNL > 0:
		cut = lastNL + 1
	case lastSP > 0:
		cut = lastSP + 1
	case cut == 0: // a character wider than max: it goes alone
		_, cut = utf8.DecodeRuneInString(text)
	}
	return cut
}
