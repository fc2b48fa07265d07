package telegram_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/telegram"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestCardGolden pins the approval card we send (sendMessage's text and
// reply_markup), pending and decided.
func TestCardGolden(t *testing.T) {
	t.Parallel()
	card := chat.ApprovalCard{ApprovalID: "apr_0123456789abcdef", Agent: "ops", Tool: "deploy",
		Arguments: "{\n  \"env\": \"prod-1\",\n  \"note\": \"a `tick` and a \\\\ slash\"\n}", Approvers: telegram.Approvers([]string{"5550001"}),
		ExpiresAt: time.Date(2026, 12, 2, 16, 30, 0, 0, time.UTC), Status: "pending"}
	denied := card
	denied.Status, denied.DecidedBy, denied.Reason = "denied", "5550001", "not on a Friday (really)."
	for name, c := range map[string]chat.ApprovalCard{"card_pending": card, "card_denied": denied} {
		t.Run(name, func(t *testing.T) {
			got, err := json.MarshalIndent(map[string]any{"text": telegram.CardText(c), "parse_mode": "MarkdownV2",
				"reply_markup": telegram.Keyboard(c)}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".golden")
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

// Approver ids show as a card says them: Telegram users (bare or as
// principals telegram:<id>) by id, keys and roles as text.
func TestCardApprovers(t *testing.T) {
	t.Parallel()
	got := telegram.Approvers([]string{"telegram:5550001", "5550002", "key:ci-key", "role:admin", "requester"})
	if want := "user 5550001, user 5550002, key:ci-key, role:admin, the requester"; got != want {
		t.Errorf("Approvers = %q, want %q", got, want)
	}
}
