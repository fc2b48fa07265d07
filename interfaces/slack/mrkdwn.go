package slack

import (
	"regexp"
	"strings"
	"unicode"
)

// Mrkdwn converts the Markdown a model writes into Slack's mrkdwn:
// **bold** and __bold__ → *bold*, *italic* → _italic_, ~~strike~~ → ~strike~,
// [text](url) → <url|text> for http(s) and mailto URLs, other links as
// "text (url)", headings → bold lines, - / * / + bullets → •,
// > quotes kept, fenced code blocks → ``` blocks (language tag dropped).
// Text inside code is not reformatted. &, < and > are escaped as HTML
// entities everywhere — inside code too, because Slack decodes entities in
// code as well (the text Slack itself sends for a code block is escaped) and
// an unescaped "<@U123>" or "<!channel>" in code would still be parsed.
func Mrkdwn(md string) string {
	var b strings.Builder
	b.Grow(len(md) + len(md)/8)
	lines := strings.Split(md, "\n")
	fence := "" // the open fence's marker, "" outside code
	for i, line := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		if marker, ok := fenceLine(line); ok {
			switch {
			case fence == "":
				fence = marker
				b.WriteString("```")
				continue
			case marker[0] == fence[0] && len(marker) >= len(fence) && strings.TrimSpace(line) == marker:
				fence = ""
				b.WriteString("```")
				continue
			}
		}
		if fence != "" {
			b.WriteString(escapeMrkdwn(line))
			continue
		}
		b.WriteString(mrkdwnLine(line))
	}
	if fence != "" {
		b.WriteString("\n```")
	}
	return b.String()
}

// fenceLine reports whether line opens or closes a fenced code block
// (up to three spaces, then ``` or ~~~) and returns the fence marker.
func fenceLine(line string) (string, bool) {
	trimmed := strings.TrimLeft(line, " ")
	if len(line)-len(trimmed) > 3 || len(trimmed) < 3 {
		return "", false
	}
	c := trimmed[0]
	if c != '`' && c != '~' {
		return "", false
	}
	n := 0
	for n < len(trimmed) && trimmed[n] == c {
		n++
	}
	if n < 3 || (c == '`' && strings.ContainsRune(trimmed[n:], '`')) {
		return "", false
	}
	return trimmed[:n], true
}

var (
	headingRe = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	bulletRe  = regexp.MustCompile(`^(\s*)[-*+]\s+(.*)$`)
	quoteRe   = regexp.MustCompile(`^ {0,3}>\s?(.*)$`)
	ruleRe    = regexp.MustCompile(`^ {0,3}(?:(?:-\s*){3,}|(?:\*\s*){3,}|(?:_\s*){3,})$`)
)

func mrkdwnLine(line string) string {
	if m := headingRe.FindStringSubmatch(line); m != nil {
		text := strings.NewReplacer("**", "", "__", "").Replace(m[1])
		if text == "" {
			return ""
		}
		return "*" + mrkdwnInline(text) + "*"
	}
	if ruleRe.MatchString(line) {
		return "──────────"
	}
	if m := bulletRe.FindStringSubmatch(line); m != nil {
		return m[1] + "• " + mrkdwnInline(m[2])
	}
	if m := quoteRe.FindStringSubmatch(line); m != nil {
		return "> " + mrkdwnInline(m[1])
	}
	return mrkdwnInline(line)
}

// mrkdwnInline converts one line outside code blocks: inline code spans are
// kept (escaped only), links and emphasis are rewritten.
func mrkdwnInline(s string) string {
	var b strings.Builder
	for s != "" {
		i := strings.IndexByte(s, '`')
		if i < 0 {
			b.WriteString(mrkdwnText(s))
			break
		}
		n := 0
		for i+n < len(s) && s[i+n] == '`' {
			n++
		}
		ticks := s[i : i+n]
		end := strings.Index(s[i+n:], ticks)
		if end < 0 {
			// No closing run: the backticks are literal.
			b.WriteString(mrkdwnText(s[:i+n]))
			s = s[i+n:]
			continue
		}
		b.WriteString(mrkdwnText(s[:i]))
		code := s[i+n : i+n+end]
		if n > 1 {
			code = strings.TrimSpace(code) // ``a ` b`` → `a ` b`; Slack has single backticks only
		}
		b.WriteString("`" + escapeMrkdwn(code) + "`")
		s = s[i+n+end+n:]
	}
	return b.String()
}

var linkRe = regexp.MustCompile(`\[([^\[\]]+)\]\(\s*(<[^>]*>|[^\s()]+(?:\([^\s()]*\)[^\s()]*)*)(?:\s+"[^"]*")?\s*\)`)

// mrkdwnText converts text with no code in it.
func mrkdwnText(s string) string {
	var b strings.Builder
	for {
		loc := linkRe.FindStringSubmatchIndex(s)
		if loc == nil {
			b.WriteString(emphasis(escapeMrkdwn(s)))
			return b.String()
		}
		b.WriteString(emphasis(escapeMrkdwn(s[:loc[0]])))
		text, u := s[loc[2]:loc[3]], strings.Trim(s[loc[4]:loc[5]], "<>")
		if !linkTarget(u) {
			// <!channel|x>, <@U123|x>, <#C123|x> would be mentions: show
			// the link as the text it is.
			b.WriteString(emphasis(escapeMrkdwn(text)) + " (" + escapeMrkdwn(u) + ")")
			s = s[loc[1]:]
			continue
		}
		// Inside <url|text>, "|" and ">" end the link; drop them from the label.
		label := strings.NewReplacer("|", "", ">", "").Replace(text)
		b.WriteString("<" + escapeMrkdwn(u) + "|" + emphasis(escapeMrkdwn(label)) + ">")
		s = s[loc[1]:]
	}
}

// linkTarget reports whether a Markdown link to u may become a Slack link
// <u|label>: an http, https or mailto URL (any case) with nothing in it that
// ends or nests Slack's <…> syntax. Anything else — !channel, @U123,
// #C123, !subteam^S123 — would turn into a mention or a command.
func linkTarget(u string) bool {
	if strings.ContainsAny(u, "|<>") || strings.ContainsFunc(u, unicode.IsControl) {
		return false
	}
	for _, scheme := range []string{"http://", "https://", "mailto:"} {
		if len(u) >= len(scheme) && strings.EqualFold(u[:len(scheme)], scheme) {
			return true
		}
	}
	return false
}

var (
	boldStarRe  = regexp.MustCompile(`\*\*(\S(?:.*?\S)?)\*\*`)
	boldUnderRe = regexp.MustCompile(`(^|\W)__(\S(?:.*?\S)?)__(\W|$)`)
	italicRe    = regexp.MustCompile(`(^|[^*\w])\*(\S(?:[^*]*?\S)?)\*([^*\w]|$)`)
	strikeRe    = regexp.MustCompile(`~~(\S(?:.*?\S)?)~~`)
)

// boldMark stands in for a converted bold marker while single-star italics
// are rewritten, so *bold* is not mistaken for italics.
const boldMark = "\x00"

func emphasis(s string) string {
	if !strings.ContainsAny(s, "*_~") {
		return s
	}
	s = strings.ReplaceAll(s, boldMark, "")
	s = boldStarRe.ReplaceAllString(s, boldMark+"$1"+boldMark)
	s = boldUnderRe.ReplaceAllString(s, "$1"+boldMark+"$2"+boldMark+"$3")
	s = italicRe.ReplaceAllString(s, "${1}_${2}_$3")
	s = strikeRe.ReplaceAllString(s, "~$1~")
	return strings.ReplaceAll(s, boldMark, "*")
}

var mrkdwnEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func escapeMrkdwn(s string) string { return mrkdwnEscaper.Replace(s) }
