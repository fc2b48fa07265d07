package main

import (
	"fmt"
	"io"
	"strings"
)

// termSafe writes text a gateway sent — a model's answer, a tool's result,
// an approval's tool name — to a terminal with its control characters
// shown as escapes (\x1b, \u202e): an ESC starting a colour or an OSC
// sequence, a carriage return or a backspace, the C1 controls and the
// bidirectional overrides. Otherwise a tool result fetched from a web page
// could repaint the screen, print a harmless-looking approval prompt and
// hide the real one (black on black) that the user then answers, or write
// to the clipboard. Newlines and tabs pass.
type termSafe struct{ w io.Writer }

func (t termSafe) Write(p []byte) (int, error) {
	s := string(p)
	if safe := printable(s); safe != s {
		if _, err := io.WriteString(t.w, safe); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return t.w.Write(p)
}

// printable is s with its control characters escaped (termSafe).
func printable(s string) string {
	i := strings.IndexFunc(s, control)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		switch {
		case !control(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// control reports whether r may change what a terminal shows other than
// by being shown.
func control(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e || r == 0x200f, r == 0x061c:
		return true // bidirectional embeddings, overrides, isolates and marks
	}
	return false
}
