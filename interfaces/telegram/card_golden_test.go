package telegram_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/telegram"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestCardGolden pins the approval card we send (sendMessage's text and
// reply_markup), pending and decided: approvers the chat names by name, the
// one it does not as a mention, and a decider known by id as a mention.
func TestCardGolden(t *testing.T) {
	t.Parallel()
	card := chat.ApprovalCard{ApprovalID: "apr_0123456789abcdef", Agent: "ops", Tool: "deploy",
		Arguments: "{\n  \"env\": \"prod-1\",\n  \"note\": \"a `tick` and a \\\\ slash\"\n}",
		ExpiresAt: time.Date(2026, 12, 2, 16, 30, 0, 0, time.UTC), Status: "pending"}
	denied := card
	denied.Status, denied.DecidedBy, denied.Reason = "denied", "5550009", "not on a Friday (really)."
	approvers, names := []string{"telegram:5550001", "5550004", "5550009", "role:admin"}, map[int64]string{5550001: "@ana_ops", 5550004: "Cleo Park"}
	for _, tc := range []struct {
		name string
		card chat.ApprovalCard
		text string
	}{
		{"card_pending", card, telegram.CardTextIn(card, approvers, names)},
		{"card_denied", denied, telegram.CardText(denied)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.MarshalIndent(map[string]any{"text": tc.text, "parse_mode": "MarkdownV2",
				"reply_markup": telegram.Keyboard(tc.card)}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if string(want) != string(got)+"\n" {
				t.Fatalf("%s differs:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}

// workflowArgs are GitHub MCP create_or_update_file arguments as a card
// shows them (indented, keys sorted): the content is longer than a card
// shows, and would push owner, path and repo out of view.
var workflowArgs = "{\n  \"branch\": \"main\",\n  \"content\": \"" + strings.Repeat(`on: push\n`, 500) +
	"\",\n  \"message\": \"ci: add workflow\",\n  \"owner\": \"victim\",\n  \"path\": \".github/workflows/x.yml\",\n  \"repo\": \"infra\"\n}"

// TestCardArgsCutGolden pins the pending card of arguments over what a
// card shows: what fits, the note saying where they show in full, and Deny
// alone, so nobody approves fields it cut off. Decided, it shows the
// outcome without the note.
func TestCardArgsCutGolden(t *testing.T) {
	t.Parallel()
	card := chat.ApprovalCard{ApprovalID: "apr_0123456789abcdef", Agent: "ops", Tool: "create_or_update_file", Server: "github", Arguments: workflowArgs,
		ExpiresAt: time.Date(2026, 12, 2, 16, 30, 0, 0, time.UTC), Status: "pending"}
	text := telegram.CardText(card)
	got, err := json.MarshalIndent(map[string]any{"text": text, "parse_mode": "MarkdownV2", "reply_markup": telegram.Keyboard(card)}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "card_pending_args_cut.golden")
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want, err := os.ReadFile(path); err != nil || string(want) != string(got)+"\n" {
		t.Errorf("%s differs (%v):\n%s", path, err, got)
	}
	const note = `Arguments cut: 2,999 of 5,149 characters shown\. Approve only where they show in full: agentgate approvals list, or GET /api/v1/approvals/apr\_0123456789abcdef\.`
	if !strings.Contains(text, note) || strings.Contains(text, "victim") {
		t.Errorf("card = %q, want the note %q and not the arguments it cut", text, note)
	}
	raw, _ := json.Marshal(telegram.Keyboard(card))
	if want := `{"inline_keyboard":[[{"text":"❌ Deny","callback_data":"d:apr_0123456789abcdef"}]]}`; string(raw) != want {
		t.Errorf("keyboard = %s, want Deny alone: %s", raw, want)
	}
	if n := len([]rune(text)); n > 4096 {
		t.Errorf("card is %d characters, over Telegram's 4,096", n)
	}
	card.Status, card.DecidedBy = "denied", "5550009"
	if text := telegram.CardText(card); strings.Contains(text, "Arguments cut") {
		t.Errorf("decided card = %q, want the outcome without the note", text)
	}
}

// Approver ids show in plain text without a lookup: Telegram users (bare
// or as principals telegram:<id>) as "a Telegram user", never a bare id;
// keys and roles as text.
func TestCardApprovers(t *testing.T) {
	t.Parallel()
	got := telegram.Approvers([]string{"telegram:5550001", "5550002", "key:ci-key", "role:admin", "requester"})
	if want := "a Telegram user, a Telegram user, key:ci-key, role:admin, the requester"; got != want {
		t.Errorf("Approvers = %q, want %q", got, want)
	}
}
