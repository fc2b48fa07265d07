// Package pieces cuts the text a fake model server streams into the pieces
// real servers send: words, and fragments of a tool call's arguments.
package pieces

import (
	"strings"
	"unicode/utf8"
)

// Words splits s before each space, so "a b c" streams as "a", " b", " c".
func Words(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s[1:], ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// Runes splits s into pieces of at most n bytes without cutting a rune.
func Runes(s string, n int) []string {
	var out []string
	for len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		if i == 0 {
			_, i = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
