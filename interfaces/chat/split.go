package chat

import (
	"regexp"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Split cuts text (Markdown) into parts of at most max units, a rune
// counting width(r) (a platform's own measure of a message's length), at
// the last line break of a part when there is one in its second half, else
// at the last space there, else anywhere between two characters. A fenced
// code block open at a cut is closed at the end of its part and opened
// again, with its language, at the start of the next, so each part renders
// on its own. Empty parts are dropped.
func Split(text string, max int, width func(rune) int) []string {
	var parts []string
	for text != "" {
		cut, reopen := cutAt(text, max, width)
		p, rest := strings.TrimRight(text[:cut], " \n"), text[cut:]
		if reopen != "" {
			p += fenceClose
			// A bare fence line right after a cut at a line break ends
			// the block: closed already. Cut inside a line, what follows
			// is that line's text, however it looks.
			if line, after, _ := strings.Cut(rest, "\n"); text[cut-1] == '\n' && isFence(line) {
				rest = after
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

// isFence reports whether line is a bare fence, backticks alone (three or
// more) between spaces: a line that closes a code block and holds nothing
// else.
func isFence(line string) bool {
	t := strings.TrimSpace(line)
	return strings.HasPrefix(t, "```") && strings.Trim(t, "`") == ""
}

// UTF16 is how many UTF-16 code units r takes: how Slack and Telegram
// measure a message (an emoji beyond the BMP counts twice).
func UTF16(r rune) int {
	if n := utf16.RuneLen(r); n > 0 {
		return n
	}
	return 1
}

// Prefix is the length in bytes of the longest prefix of s that takes at
// most max units, a rune counting width(r); at least s's first rune.
func Prefix(s string, max int, width func(rune) int) int {
	units := 0
	for i, r := range s {
		if units += width(r); units > max {
			if i == 0 {
				_, n := utf8.DecodeRuneInString(s)
				return n
			}
			return i
		}
	}
	return len(s)
}

// cutAt is where Split cuts text for a part of at most max units and,
// when the part ends inside a fenced code block, the fence that opens the
// block again in the next part (the part then has room to close it).
func cutAt(text string, max int, width func(rune) int) (cut int, reopen string) {
	cut = splitPoint(text, max, width)
	if cut == len(text) {
		return cut, ""
	}
	if _, _, open := openFence(text[:cut]); !open {
		return cut, ""
	}
	short := splitPoint(text, max-len(fenceClose), width)
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
func splitPoint(text string, max int, width func(rune) int) int {
	cut, units, lastNL, lastSP := len(text), 0, -1, -1
	for i, r := range text {
		n := width(r)
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

// fenceLang is the language word after a fence's backticks.
var fenceLang = regexp.MustCompile(`^[A-Za-z0-9_+-]*`)
