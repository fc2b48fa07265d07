package telegram

import (
	"regexp"
	"strings"
)

// Markdown converts the Markdown agents write to MarkdownV2: fenced and
// inline code, **bold**, *italic*, [links](url), headings (bold) and
// bullets (•); every other special character is escaped, so anything else
// shows as written and the entities are always balanced (Telegram refuses
// a message whose entities it cannot parse).
func Markdown(s string) string {
	var b strings.Builder
	lines := strings.SplitAfter(s, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			lang := fenceLang.FindString(strings.TrimPrefix(trimmed, "```"))
			j := i + 1
			for j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "```") {
				j++
			}
			body := strings.TrimSuffix(strings.Join(lines[i+1:j], ""), "\n")
			b.WriteString("```" + lang + "\n" + escapeCode(body) + "\n```")
			if j < len(lines) && strings.HasSuffix(lines[j], "\n") {
				b.WriteByte('\n')
			}
			i = j
			continue
		}
		body, nl := strings.CutSuffix(line, "\n")
		switch m := heading.FindStringSubmatch(body); {
		case m != nil:
			b.WriteString("*" + Escape(m[1]) + "*")
		default:
			if m := bullet.FindStringSubmatch(body); m != nil {
				b.WriteString(Escape(m[1]) + "• ")
				body = body[len(m[0]):]
			}
			b.WriteString(inline(body))
		}
		if nl {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

var (
	fenceLang = regexp.MustCompile(`^[A-Za-z0-9_+-]*`)
	heading   = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*$`)
	bullet    = regexp.MustCompile(`^(\s*)[-*+]\s+`)
	inlineTok = regexp.MustCompile("`[^`\n]+`|\\*\\*[^*\n]+\\*\\*|__[^_\n]+__|\\[[^\\]\n]+\\]\\([^)\\s]+\\)|\\*[^*\\s][^*\n]*\\*")
)

// inline converts the inline Markdown of one line.
func inline(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range inlineTok.FindAllStringIndex(s, -1) {
		b.WriteString(Escape(s[last:m[0]]))
		tok := s[m[0]:m[1]]
		switch {
		case tok[0] == '`':
			b.WriteString("`" + escapeCode(tok[1:len(tok)-1]) + "`")
		case strings.HasPrefix(tok, "**") || strings.HasPrefix(tok, "__"):
			b.WriteString("*" + Escape(tok[2:len(tok)-2]) + "*")
		case tok[0] == '[':
			text, url, _ := strings.Cut(tok[1:len(tok)-1], "](")
			b.WriteString("[" + Escape(text) + "](" + strings.NewReplacer(`\`, `\\`, ")", `\)`).Replace(url) + ")")
		default:
			b.WriteString("_" + Escape(tok[1:len(tok)-1]) + "_")
		}
		last = m[1]
	}
	b.WriteString(Escape(s[last:]))
	return b.String()
}
