package telegram_test

import (
	"encoding/json"
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
