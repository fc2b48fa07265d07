package slack

import (
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	t.Parallel()
	para := strings.Repeat("word ", 10) // 50 chars
	tests := []struct {
		name  string
		in    string
		limit int
		want  []string
	}{
		{"fits", "short text", 100, []string{"short text"}},
		{"empty", "", 100, nil},
		{"paragraphs", "aaaa aaaa\n\nbbbb bbbb\n\ncccc", 22, []string{"aaaa aaaa\n\nbbbb bbbb", "cccc"}},
		{"lines", "line one\nline two\nline three", 20, []string{"line one\nline two", "line three"}},
		{"words", para, 20, []string{"word word word word", "word word word word", "word word"}},
		{"long word", strings.Repeat("x", 40), 16, []string{strings.Repeat("x", 16), strings.Repeat("x", 16), strings.Repeat("x", 8)}},
		{"emoji counted as two", strings.Repeat("😀", 10), 16, []string{strings.Repeat("😀", 8), strings.Repeat("😀", 2)}},
		{"code fence closed and reopened",
			"intro\n```\nline1\nline2\nline3\nline4\n```\nend", 24,
			[]string{"intro\n```\nline1\n```", "```\nline2\nline3\n```", "```\nline4\n```\nend"}},
		{"a line after the cut that starts like a fence keeps its text", // found by FuzzSplit
			"``` 0000 ```00000", 16, []string{"``` 0000\n```", "```\n```00000"}},
		{"and one with a backtick after it", // found by FuzzSplit
			"``` 00000000``` `", 16, []string{"``` 00000000\n```", "```\n``` `"}},
		{"a cut inside a line before four backticks keeps them", // found by FuzzSplit
			"``` 00000000```` ", 16, []string{"``` 00000000\n```", "```\n````"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Split(tt.in, tt.limit)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Fatalf("Split(%q, %d)\n got %q\nwant %q", tt.in, tt.limit, got, tt.want)
			}
			for _, c := range got {
				if textLen(c) > max(tt.limit, minLimit) {
					t.Errorf("chunk %q is %d chars, over %d", c, textLen(c), tt.limit)
				}
			}
		})
	}
}

func TestMessages(t *testing.T) {
	t.Parallel()
	line := strings.Repeat("y", 99) + "\n" // 100 chars
	text := strings.Repeat(line, 2000)     // 200,000 chars → 67 sections of 3,000
	msgs := Messages(text)
	var all strings.Builder
	for _, m := range msgs {
		if len(m) > MaxBlocks {
			t.Errorf("message has %d sections", len(m))
		}
		total := 0
		for _, s := range m {
			if textLen(s) > MaxSectionText {
				t.Errorf("section of %d chars", textLen(s))
			}
			total += textLen(s)
			all.WriteString(strings.ReplaceAll(s, "\n", ""))
		}
		if total > MaxMessageText {
			t.Errorf("message of %d chars", total)
		}
	}
	if all.String() != strings.ReplaceAll(text, "\n", "") {
		t.Error("text lost in Messages") // all but the line breaks at cuts
	}
	if len(msgs) != 6 { // 67 sections of 3,000, 13 per 40,000-char message
		t.Errorf("got %d messages, want 6", len(msgs))
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("para one\n\npara two\nline\n```go\ncode here\nmore code\n```\ntail words here", 16)
	f.Add(strings.Repeat("😀a ", 50), 17)
	f.Add("```\n```\n```", 20)
	f.Fuzz(func(t *testing.T, text string, limit int) {
		limit = max(minLimit, limit%5000)
		parts := Split(text, limit)
		for i, p := range parts {
			if p == "" {
				t.Fatalf("part %d is empty", i)
			}
			if n := textLen(p); n > limit {
				t.Fatalf("part %d is %d chars, limit %d", i, n, limit)
			}
		}
		// Nothing but the whitespace at cuts is lost (fences may be added).
		visible := func(s string) []rune {
			return []rune(strings.Map(func(r rune) rune {
				if r == ' ' || r == '\n' {
					return -1
				}
				return r
			}, s))
		}
		// The text's bare fence lines are markup, not text: one right after
		// a cut becomes the part's own closing fence ("````" closes a "```"
		// block as "```" does).
		var textLines []string
		for _, line := range strings.Split(text, "\n") {
			if t := strings.TrimSpace(line); !strings.HasPrefix(t, "```") || strings.Trim(t, "`") != "" {
				textLines = append(textLines, line)
			}
		}
		want := visible(strings.Join(textLines, "\n"))
		var got []rune
		for _, p := range parts {
			got = append(got, visible(p)...)
		}
		for _, r := range got {
			if len(want) > 0 && r == want[0] {
				want = want[1:]
			}
		}
		if len(want) > 0 {
			t.Fatalf("text lost: %q not in %q", string(want), parts)
		}
	})
}
