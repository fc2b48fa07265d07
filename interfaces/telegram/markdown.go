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
	// inlineTok finds code, bold, the start of a link ("[text](", its URL
	// read by linkURL) and italic.
	inlineTok = regexp.MustCompile("`[^`\n]+`|\\*\\*[^*\n]+\\*\\*|__[^_\n]+__|\\[[^\\]\n]+\\]\\(|\\*[^*\\s][^*\n]*\\*")
)

// inline converts the inline Markdown of one line.
func inline(s string) string {
	var b strings.Builder
	for s != "" {
		m := inlineTok.FindStringIndex(s)
		if m == nil {
			break
		}
		tok := s[m[0]:m[1]]
		if tok[0] == '[' {
			url, n, ok := linkURL(s[m[1]:])
			if !ok { // "[" starts no link: text
				b.WriteString(Escape(s[:m[0]+1]))
				s = s[m[0]+1:]
				continue
			}
			b.WriteString(Escape(s[:m[0]]))
			b.WriteString("[" + Escape(tok[1:len(tok)-2]) + "](" + linkEscaper.Replace(url) + ")")
			s = s[m[1]+n:]
			continue
		}
		b.WriteString(Escape(s[:m[0]]))
		switch {
		case tok[0] == '`':
			b.WriteString("`" + escapeCode(tok[1:len(tok)-1]) + "`")
		case strings.HasPrefix(tok, "**") || strings.HasPrefix(tok, "__"):
			b.WriteString("*" + Escape(tok[2:len(tok)-2]) + "*")
		default:
			b.WriteString("_" + Escape(tok[1:len(tok)-1]) + "_")
		}
		s = s[m[1]:]
	}
	b.WriteString(Escape(s))
	return b.String()
}

// linkEscaper escapes a URL for the (...) of a MarkdownV2 inline link,
// where ')' and '\' must be escaped.
var linkEscaper = strings.NewReplacer(`\`, `\\`, ")", `\)`)

// maxLinkParens is how deeply parentheses may nest in a link's URL, as
// CommonMark implementations bound it.
const maxLinkParens = 32

// linkURL reads the destination of an inline link, s following its "](",
// as CommonMark does: a URL without spaces or control characters whose
// parentheses are balanced or backslash-escaped, up to the ')' closing the
// link. It returns the URL, its backslash escapes resolved, and how much
// of s it took with the closing ')'; ok is false when s holds no link.
func linkURL(s string) (url string, n int, ok bool) {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
			b.WriteByte(s[i+1])
			i++
		case c <= ' ' || c == 0x7f:
			return "", 0, false
		case c == '(':
			if depth++; depth > maxLinkParens {
				return "", 0, false
			}
			b.WriteByte(c)
		case c == ')' && depth == 0:
			return b.String(), i + 1, b.Len() > 0
		case c == ')':
			depth--
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, false
}

// isASCIIPunct reports whether c is ASCII punctuation, which a backslash
// escapes in CommonMark.
func isASCIIPunct(c byte) bool {
	return c > ' ' && c < 0x7f && !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z')
}
