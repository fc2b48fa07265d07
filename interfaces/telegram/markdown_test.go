package telegram_test

import (
	"testing"

	"github.com/agentgate/agentgate/interfaces/telegram"
)

func TestMarkdown(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"plain", "Done. 2+2=4!", `Done\. 2\+2\=4\!`},
		{"bold and italic", "**Routine standup** is *ready*", `*Routine standup* is _ready_`},
		{"snake_case stays", "set my_var_name = 1", `set my\_var\_name \= 1`},
		{"inline code", "run `make test` (fast)", "run `make test` \\(fast\\)"},
		{"code escapes only ` and \\", "`a\\b`", "`a\\\\b`"},
		{"fence", "```go\nx := a_b * 2\n```\nafter.", "```go\nx := a_b * 2\n```\nafter\\."},
		{"unclosed fence", "```\ncode", "```\ncode\n```"},
		{"link", "see [the docs](https://example.com/a_b?x=1).", `see [the docs](https://example.com/a_b?x=1)\.`},
		{"heading", "## Next steps\n- one\n* two", "*Next steps*\n• one\n• two"},
		{"lone stars", "2 * 3 * 4", `2 \* 3 \* 4`},
		{"backslash", `C:\temp`, `C:\\temp`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := telegram.Markdown(tt.in); got != tt.want {
				t.Errorf("Markdown(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzMarkdown(f *testing.F) {
	f.Add("**a** *b* `c` [d](e) ```\nf\n```")
	f.Fuzz(func(t *testing.T, s string) {
		_ = telegram.Markdown(s)
	})
}
