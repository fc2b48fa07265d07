package slack

import "testing"

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
			if got := Mrkdwn(tt.in); got != tt.want {
				t.Errorf("Mrkdwn(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzMrkdwn(f *testing.F) {
	for _, s := range []string{"**a** *b* ~~c~~ [d](http://e) `f`", "```go\nx\n```", "# h\n- a\n> q", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		_ = Mrkdwn(md) // must not panic
	})
}
