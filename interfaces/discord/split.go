package discord

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxMessage is the most characters Discord takes in a message's content.
const MaxMessage = 2000

// Split cuts text into parts of at most max characters (runes), at a
// paragraph break, else a line break, else a space, else anywhere. A part
// never ends inside a code block: a fence left open is closed at the cut and
// reopened in the next part.
func Split(text string, max int) []string {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	var parts []string
	reopen := ""
	for text != "" {
		text = reopen + text
		if utf8.RuneCountInString(text) <= max {
			parts = append(parts, text)
			break
		}
		limit := max - len("\n```") // room to close a fence
		cut := byteIndexOfRune(text, limit)
		head := text[:cut]
		if i := strings.LastIndex(head, "\n\n"); i > cut/2 {
			cut = i
		} else if i := strings.LastIndexByte(head, '\n'); i > cut/2 {
			cut = i
		} else if i := strings.LastIndexByte(head, ' '); i > cut/2 {
			cut = i
		}
		part := strings.TrimRight(text[:cut], " \n")
		reopen = ""
		if strings.Count(part, "```")%2 == 1 {
			part += "\n```"
			reopen = "```\n"
		}
		parts = append(parts, part)
		text = strings.TrimLeft(text[cut:], " \n")
	}
	return parts
}

// byteIndexOfRune is the byte offset of the n-th rune of s (len(s) if s is
// shorter).
func byteIndexOfRune(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

func itoa(i int) string { return strconv.Itoa(i) }
