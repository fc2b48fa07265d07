package slack

import (
	"fmt"
	"strings"
	"testing"
)

func TestMrkdwn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello world", "hello world"},
		{"bold", "this is **important**", "this is *important*"},
		{"bold underscores", "this is __important__", "this is *important*"},
		{"italic star", "this is *subtle*", "this is _subtle_"},
		{"italic underscore kept", "this is _subtle_", "this is _subtle_"},
		{"bold and italic", "**a** and *b*", "*a* and _b_"},
		{"strike", "~~gone~~ here", "~gone~ here"},
		{"link", "see [the docs](https://example.com/a?b=1&c=2)", "see <https://example.com/a?b=1&amp;c=2|the docs>"},
		{"link with parens", "[wiki](https://en.wikipedia.org/wiki/Go_(language))", "<https://en.wikipedia.org/wiki/Go_(language)|wiki>"},
		{"link with bold label", "[**x**](http://a)", "<http://a|*x*>"},
		{"link pipe in label", "[a|b](http://a)", "<http://a|ab>"},
		{"heading", "# Plan", "*Plan*"},
		{"heading with bold", "## The **real** plan ##", "*The real plan*"},
		{"bullets", "- one\n* two\n  + three", "• one\n• two\n  • three"},
		{"ordered list kept", "1. one\n2. two", "1. one\n2. two"},
		{"quote", "> quoted **text**", "> quoted *text*"},
		{"rule", "---", "──────────"},
		{"escape", "a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"},
		{"no mention injection", "<!channel> <@U123>", "&lt;!channel&gt; &lt;@U123&gt;"},
		{"no mention injection: channel link", "[x](!channel)", "x (!channel)"},
		{"no mention injection: here link", "[**all**](<!here>)", "*all* (!here)"},
		{"no mention injection: group link", "[x](!subteam^S0123ABC)", "x (!subteam^S0123ABC)"},
		{"no mention injection: user link", "[x](@U0BOSS1)", "x (@U0BOSS1)"},
		{"no mention injection: channel id link", "[x](#C0GENERAL)", "x (#C0GENERAL)"},
		{"no mention injection: date link", "[x](!date^1700000000^{date}|soon)", "x (!date^1700000000^{date}|soon)"},
		{"link of another scheme as text", "[run](javascript:alert(1))", "run (javascript:alert(1))"},
		{"link with angle brackets as text", "[x](<https://a.example/<@U1>>)", "x (https://a.example/&lt;@U1)"},
		{"link with pipe as text", "[x](https://a.example/|y)", "x (https://a.example/|y)"},
		{"link with control character as text", "[x](https://a.example/\x1b)", "x (https://a.example/\x1b)"},
		{"link scheme any case", "[mail](MAILTO:ops@example.com) [web](HTTPS://example.com)", "<MAILTO:ops@example.com|mail> <HTTPS://example.com|web>"},
		{"inline code untouched", "run `**not bold** <x>` now", "run `**not bold** &lt;x&gt;` now"},
		{"double backtick code", "``a ` b``", "`a ` b`"},
		{"unclosed backtick", "a ` b **c**", "a ` b *c*"},
		{"code block", "```go\nfunc main() { a := *p && **q }\n```\nafter **x**", "```\nfunc main() { a := *p &amp;&amp; **q }\n```\nafter *x*"},
		{"tilde fence", "~~~\n# not a heading\n~~~", "```\n# not a heading\n```"},
		{"unclosed fence closed", "```\ncode", "```\ncode\n```"},
		{"fence inside fence", "````\n```\ninner\n```\n````", "```\n```\ninner\n```\n```"},
		{"multiplication not italic", "2 * 3 * 4", "2 * 3 * 4"},
		{"snake_case kept", "use snake_case_names here", "use snake_case_names here"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Mrkdwn(tt.in)
			if got != tt.want {
				t.Errorf("Mrkdwn(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if err := checkSlackTokens(got); err != nil {
				t.Errorf("Mrkdwn(%q) = %q: %v", tt.in, got, err)
			}
		})
	}
}

// checkSlackTokens returns an error when mrkdwn holds a Slack token other
// than a link: every "<" must open <http://…|, <https://…| or <mailto:…|,
// never a mention (<!channel>, <@U123>, <#C123>, <!subteam^…>).
func checkSlackTokens(mrkdwn string) error {
	for i := strings.IndexByte(mrkdwn, '<'); i >= 0; i = next(mrkdwn, i) {
		token := strings.ToLower(mrkdwn[i:])
		if !strings.HasPrefix(token, "<http://") && !strings.HasPrefix(token, "<https://") && !strings.HasPrefix(token, "<mailto:") {
			return fmt.Errorf("Slack token at %d is not a link: %.20q", i, mrkdwn[i:])
		}
	}
	return nil
}

// next is the index of the "<" after the one at i in s, or -1.
func next(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '<')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

func FuzzMrkdwn(f *testing.F) {
	for _, s := range []string{"**a** *b* ~~c~~ [d](http://e) `f`", "```go\nx\n```", "# h\n- a\n> q", "<&>",
		"[x](!channel) [y](@U0BOSS1) [z](<#C1>)", "[✅ Approve](https://evil.example) [x](!subteam^S0123ABC)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		// Whatever the model writes, it makes links at most, never a mention.
		if out := Mrkdwn(md); checkSlackTokens(out) != nil {
			t.Fatalf("Mrkdwn(%q) = %q: %v", md, out, checkSlackTokens(out))
		}
	})
}
