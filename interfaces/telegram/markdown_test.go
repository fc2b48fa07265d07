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
		// A URL's balanced parentheses are part of it (CommonMark); in the
		// MarkdownV2 URL ')' and '\' are escaped.
		{"link with parentheses", "[Go](https://en.wikipedia.org/wiki/Go_(programming_language)) is a language.",
			`[Go](https://en.wikipedia.org/wiki/Go_(programming_language\)) is a language\.`},
		{"link in parentheses", "(see [Go](https://en.wikipedia.org/wiki/Go_(programming_language))).",
			`\(see [Go](https://en.wikipedia.org/wiki/Go_(programming_language\))\)\.`},
		{"nested parentheses", "[f](https://x.test/f(a(b)c)d)", `[f](https://x.test/f(a(b\)c\)d)`},
		{"escaped parenthesis", `[a](https://x.test/a\)b) c`, `[a](https://x.test/a\)b) c`},
		{"backslash in the URL", `[a](https://x.test/a\b)`, `[a](https://x.test/a\\b)`},
		{"unbalanced is no link", "[a](https://x.test/(b) c", `\[a\]\(https://x\.test/\(b\) c`},
		{"space is no link", "[a](b c) **d**", `\[a\]\(b c\) *d*`},
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
