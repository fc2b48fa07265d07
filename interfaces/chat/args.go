package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"
)

// ArgsRoom is how much of an approval's arguments one platform's card
// shows: at most Max, measured by Len as the platform shows them (after its
// escaping, in its unit). A card whose arguments do not fit shows what does,
// ended by Mark, and offers no Approve: a person could approve fields cut
// off the card (keys are sorted, so a long free-text field pushes "owner",
// "path" and "repo" out of view). The renderer and the click check use the
// platform's one ArgsRoom, so a card offers Approve exactly when a click on
// Approve may count. The zero ArgsRoom shows any arguments in full.
type ArgsRoom struct {
	Max  int
	Len  func(args string) int
	Mark string // ends the arguments shown when they were cut
}

// ArgsShown is what a card shows of its arguments.
type ArgsShown struct {
	// Text is the arguments, or when Cut the longest prefix that fits with
	// the room's Mark after it.
	Text string
	Cut  bool
	// Shown of Total characters of the arguments are on the card.
	Shown, Total int
}

// Fits reports whether args show in full in r.
func (r ArgsRoom) Fits(args string) bool { return r.Len == nil || r.Len(args) <= r.Max }

// Fit is what a card shows of args in r: all of them when they fit, else
// the longest prefix (whole characters) that fits with r.Mark.
func (r ArgsRoom) Fit(args string) ArgsShown {
	total := utf8.RuneCountInString(args)
	if r.Fits(args) {
		return ArgsShown{Text: args, Shown: total, Total: total}
	}
	ends := make([]int, 0, total+1) // ends[k]: the bytes of the first k characters
	for i := range args {
		ends = append(ends, i)
	}
	ends = append(ends, len(args))
	fits := func(k int) bool { return r.Len(args[:ends[k]]+r.Mark) <= r.Max }
	k := max(sort.Search(total+1, func(k int) bool { return !fits(k) })-1, 0)
	for k > 0 && !fits(k) { // only if Len is not monotonic in the prefix
		k--
	}
	return ArgsShown{Text: args[:ends[k]] + r.Mark, Cut: true, Shown: k, Total: total}
}

// CardArgs is an approval's arguments as a card shows them: indented JSON
// (the raw text when it is not JSON).
func CardArgs(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}

// CutNote is the line a pending card whose arguments were cut (s) shows in
// place of Approve, and the answer to a click on Approve for it: where the
// arguments of approval id show in full, to be approved there. Plain text,
// under the 200 characters Telegram shows in a click's answer.
func CutNote(id string, s ArgsShown) string {
	return fmt.Sprintf("Arguments cut: %s of %s characters shown. Approve only where they show in full: agentgate approvals list, or GET /api/v1/approvals/%s.",
		thousands(s.Shown), thousands(s.Total), id)
}

// thousands writes n with a comma every three digits: 4,873.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
