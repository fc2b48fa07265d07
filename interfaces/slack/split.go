package slack

import (
	"strings"
	"unicode/utf8"
)

// Slack's limits for what we post. Lengths are counted in UTF-16 code units,
// which is never less than Slack's character count.
const (
	MaxSectionText = 3000   // a section block's text
	MaxMessageText = 40_000 // a message's text; Slack truncates beyond it
	MaxBlocks      = 50     // blocks in one message
)

const (
	fenceOpen  = "```\n"
	fenceClose = "\n```"
	minLimit   = 16
)

// Split cuts text into chunks of at most limit characters, preferring
// paragraph breaks, then line breaks, then spaces, and cutting inside a word
// only when a word alone is longer than the limit. A chunk that ends inside a
// ``` code block is closed with "\n```" and the next chunk reopens it with
// "```\n"; apart from those fence fix-ups the chunks concatenate to text.
// Limits below 16 are raised to 16.
func Split(text string, limit int) []string {
	pieces := splitPieces(text, limit)
	out := make([]string, len(pieces))
	for i, p := range pieces {
		out[i] = p.render()
	}
	return out
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

type piece struct {
	text          string
	reopen, close bool // wrap in fence fix-ups
}

func (p piece) render() string {
	s := p.text
	if p.reopen {
		s = fenceOpen + s
	}
	if p.close {
		s += fenceClose
	}
	return s
}

func splitPieces(text string, limit int) []piece {
	limit = max(limit, minLimit)
	var out []piece
	open := false // inside a ``` block at the start of text
	for text != "" {
		reopenCost := 0
		if open {
			reopenCost = len(fenceOpen)
		}
		if textLen(text)+reopenCost <= limit {
			out = append(out, piece{text: text, reopen: open})
			break
		}
		budget := limit - reopenCost
		cut := cutPoint(text, budget)
		if fenceState(text[:cut], open) {
			// The chunk needs "\n```" to close its code block: make room.
			cut = cutPoint(text, budget-len(fenceClose))
		}
		p := piece{text: text[:cut], reopen: open}
		open = fenceState(p.text, open)
		p.close = open
		out = append(out, p)
		text = text[cut:]
	}
	return out
}

// cutPoint returns the byte offset to cut text at so that text[:cut] is at
// most budget characters, at the best boundary in the second half.
func cutPoint(text string, budget int) int {
	end := prefixWithin(text, budget)
	for _, sep := range []string{"\n\n", "\n", " "} {
		if i := strings.LastIndex(text[:end], sep); i > 0 && i+len(sep) >= end/2 {
			return i + len(sep)
		}
	}
	return end
}

// prefixWithin returns the longest prefix length (bytes, on a rune boundary)
// of s whose textLen is at most n; at least one rune.
func prefixWithin(s string, n int) int {
	units, i := 0, 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		u := runeUnits(r)
		if units+u > n {
			break
		}
		units += u
		i += size
	}
	if i == 0 {
		_, i = utf8.DecodeRuneInString(s)
	}
	return i
}

// fenceState reports whether a ``` block is open after s, given whether one
// was open before it. A fence is a line starting with ``` (after up to three
// spaces); the last line counts even without its newline.
func fenceState(s string, open bool) bool {
	for line := range strings.SplitSeq(s, "\n") {
		if _, ok := fenceLine(line); ok && strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			open = !open
		}
	}
	return open
}

func textLen(s string) int {
	n := 0
	for _, r := range s {
		n += runeUnits(r)
	}
	return n
}

func runeUnits(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}
