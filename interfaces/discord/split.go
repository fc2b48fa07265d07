package discord

import (
	"strconv"
	"strings"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// MaxMessage is the most characters Discord takes in a message's content.
const MaxMessage = 2000

// MaxUpload is the largest file a bot may upload to a server without
// boosts (10 MiB, with room for the request around it).
const MaxUpload = 10_000_000

// Split cuts text into parts of at most max characters (runes), as
// chat.Split does: at a line break, else a space, else anywhere, and never
// inside a code block (a fence open at a cut is closed and reopened).
func Split(text string, max int) []string {
	return chat.Split(strings.TrimSpace(text), max, func(rune) int { return 1 })
}

func itoa(i int) string { return strconv.Itoa(i) }
