package chat_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// A card shows arguments that fit in full; of longer ones the longest
// prefix that fits with the mark, measured as the platform measures (here
// escaping doubles "<"), and says how many characters it showed.
func TestArgsRoomFit(t *testing.T) {
	t.Parallel()
	escaped := func(s string) int { return utf8.RuneCountInString(strings.ReplaceAll(s, "<", "<<")) }
	room := chat.ArgsRoom{Max: 10, Len: escaped, Mark: "…"}
	for _, tc := range []struct {
		name, args string
		want       chat.ArgsShown
	}{
		{"fits", "é<12345", chat.ArgsShown{Text: "é<12345", Shown: 7, Total: 7}},
		{"fits exactly", "<<123456", chat.ArgsShown{Text: "<<123456", Shown: 8, Total: 8}},
		{"cut", "é<123456789", chat.ArgsShown{Text: "é<123456…", Cut: true, Shown: 8, Total: 11}},
		{"cut before an escape", "12345678<9", chat.ArgsShown{Text: "12345678…", Cut: true, Shown: 8, Total: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := room.Fit(tc.args)
			if got != tc.want {
				t.Errorf("Fit(%q) = %+v, want %+v", tc.args, got, tc.want)
			}
			if got.Cut == room.Fits(tc.args) || escaped(got.Text) > room.Max {
				t.Errorf("Fit(%q) = %+v: Fits says %v, shown length %d of %d", tc.args, got, room.Fits(tc.args), escaped(got.Text), room.Max)
			}
		})
	}
	if got := (chat.ArgsRoom{}).Fit(strings.Repeat("x", 5000)); got.Cut {
		t.Errorf("the zero room cut the arguments: %+v", got)
	}
}

func TestCutNote(t *testing.T) {
	t.Parallel()
	got := chat.CutNote("apr_0123456789abcdef", chat.ArgsShown{Cut: true, Shown: 1198, Total: 1234567})
	want := "Arguments cut: 1,198 of 1,234,567 characters shown. Approve only where they show in full: agentgate approvals list, or GET /api/v1/approvals/apr_0123456789abcdef."
	if got != want {
		t.Errorf("CutNote = %q, want %q", got, want)
	}
	if n := utf8.RuneCountInString(got); n > 200 {
		t.Errorf("CutNote is %d characters: more than a Telegram click's answer shows", n)
	}
}
