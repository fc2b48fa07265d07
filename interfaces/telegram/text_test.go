package telegram_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/interfaces/telegram"
)

func TestEscape(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain":                 "plain",
		"a.b-c!":                `a\.b\-c\!`,
		`C:\path`:               `C:\\path`,
		"_*[]()~`>#+-=|{}.!":    "\\_\\*\\[\\]\\(\\)\\~\\`\\>\\#\\+\\-\\=\\|\\{\\}\\.\\!",
		"emoji 🚀 stays (1+1=2)": `emoji 🚀 stays \(1\+1\=2\)`,
	} {
		if got := telegram.Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		max  int
		want int
	}{
		{"short", "hello", 4096, 1},
		{"lines", strings.Repeat("0123456789\n", 1000), 4096, 3},
		{"one long word", strings.Repeat("x", 9000), 4096, 3},
		{"emoji count as two units", strings.Repeat("😀", 3000), 4096, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := telegram.Split(tt.text, tt.max)
			if len(parts) != tt.want {
				t.Fatalf("parts = %d, want %d", len(parts), tt.want)
			}
			for _, p := range parts {
				if n := len(utf16.Encode([]rune(p))); n > tt.max {
					t.Fatalf("part of %d units > %d", n, tt.max)
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`{"update_id":1,"message":{"message_id":1,"from":{"id":2},"chat":{"id":-3,"type":"group"},"text":"@b x","entities":[{"offset":0,"length":2,"type":"mention"}]}}`)
	f.Fuzz(func(t *testing.T, s string) {
		var u models.Update
		if json.Unmarshal([]byte(s), &u) != nil {
			return
		}
		_ = telegram.Parser{BotID: 9, BotUsername: "b"}.Parse(u)
	})
}

// codeAnswer is an answer with a Go code block of n numbered lines between
// two paragraphs.
func codeAnswer(n int) (text string, code []string) {
	var b strings.Builder
	b.WriteString("Here is the **fix**; it keeps the retries (see below).\n\n```go\n")
	for i := range n {
		line := fmt.Sprintf("\tfmt.Printf(\"step %03d: %%s\\n\", name) // keep `going`", i)
		code = append(code, line)
		b.WriteString(line + "\n")
	}
	b.WriteString("```\nRun it with `go test ./...` and tell me.")
	return b.String(), code
}

// fences reads the fenced code blocks of one part as Markdown does: their
// opening lines, the lines inside them, the lines outside, and whether the
// part ends inside one.
func fences(part string) (openers, code, prose []string, open bool) {
	for line := range strings.SplitSeq(part, "\n") {
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "```"):
			if open = !open; open {
				openers = append(openers, line)
			}
		case open:
			code = append(code, line)
		default:
			prose = append(prose, line)
		}
	}
	return openers, code, prose, open
}

// A code block that does not fit one message is closed at the end of each
// part and opened again, with its language, at the start of the next:
// every part is valid Markdown on its own, the code stays code, and what
// follows the block stays text, wherever the cut falls.
func TestSplitKeepsCodeBlocks(t *testing.T) {
	t.Parallel()
	text, want := codeAnswer(40)
	for max := 80; max <= 1200; max++ { // every cut: before, in and after the block
		parts := telegram.Split(text, max)
		if len(parts) < 2 {
			t.Fatalf("max %d: %d part, want the block split", max, len(parts))
		}
		var code, prose []string
		for i, p := range parts {
			if n := len(utf16.Encode([]rune(p))); n > max {
				t.Fatalf("max %d: part %d has %d units", max, i, n)
			}
			openers, c, pr, open := fences(p)
			if open {
				t.Fatalf("max %d: part %d ends inside a code block:\n%s", max, i, p)
			}
			for _, o := range openers {
				if o != "```go" {
					t.Fatalf("max %d: part %d opens a code block with %q, want ```go:\n%s", max, i, o, p)
				}
			}
			if strings.Contains(p, "```go\n```") {
				t.Fatalf("max %d: part %d has an empty code block:\n%s", max, i, p)
			}
			code, prose = append(code, c...), append(prose, pr...)
		}
		if !slices.Equal(code, want) {
			t.Fatalf("max %d: the code across the parts is\n%q\nwant\n%q", max, code, want)
		}
		if got := strings.Join(prose, "\n"); !strings.Contains(got, "keeps the retries") || !strings.HasSuffix(got, "Run it with `go test ./...` and tell me.") {
			t.Fatalf("max %d: the text around the code is %q", max, got)
		}
	}
}

// TestLongAnswerGolden pins the messages (MarkdownV2, as sendMessage's
// text) of a long answer whose code block crosses Telegram's 4,096 limit.
func TestLongAnswerGolden(t *testing.T) {
	t.Parallel()
	text, _ := codeAnswer(90)
	var b strings.Builder
	parts := telegram.Split(text, telegram.MaxMessageLen)
	for i, p := range parts {
		fmt.Fprintf(&b, "-- message %d of %d --\n%s\n", i+1, len(parts), telegram.Markdown(p))
	}
	got := b.String()
	path := filepath.Join("testdata", "long_answer.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Fatalf("%s differs:\n%s\nwant:\n%s", path, got, want)
	}
}

// FuzzSplit: every part is within max (but a character wider than max),
// and with room for the fences every part but the last ends outside a
// code block.
func FuzzSplit(f *testing.F) {
	text, _ := codeAnswer(30)
	f.Add(text, 300)
	f.Add("```\n"+strings.Repeat("x", 500)+"\n```\nafter", 128)
	f.Add("a\n```py\n\n\n```\n```\nb", 130)
	f.Add("😀", 1)
	f.Fuzz(func(t *testing.T, text string, max int) {
		if max < 1 || max > 5000 {
			return
		}
		fencesFit := max >= 128
		for line := range strings.SplitSeq(text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") && len(line) > 32 {
				fencesFit = false
			}
		}
		parts := telegram.Split(text, max)
		for i, p := range parts {
			if n := len(utf16.Encode([]rune(p))); n > max && len([]rune(p)) > 1 {
				t.Fatalf("part %d has %d units > %d", i, n, max)
			}
			if _, _, _, open := fences(p); open && fencesFit && i < len(parts)-1 {
				t.Fatalf("part %d of %d ends inside a code block:\n%q", i, len(parts), p)
			}
		}
	})
}
