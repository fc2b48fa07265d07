package slack

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/agentgate/agentgate/interfaces/chat"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func goldenJSON(t *testing.T, name string, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // slack-go's block MarshalJSON still escapes <>&, as on the wire
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file (run go test -update if intended):\n%s", path, got)
	}
	return got
}

func TestApprovalBlocksGolden(t *testing.T) {
	t.Parallel()
	expires := time.Date(2026, 3, 4, 14, 3, 0, 0, time.UTC)
	decided := time.Date(2026, 3, 4, 13, 52, 30, 0, time.UTC)
	base := chat.ApprovalCard{
		ApprovalID:  "apr_0123456789abcdef",
		Agent:       "ops",
		Tool:        "deploy",
		Arguments:   "{\n  \"env\": \"prod\",\n  \"service\": \"billing <api>\",\n  \"version\": \"v1.4.2\"\n}",
		Approvers:   "<@U222BBB222>, <!subteam^S0614TZR7>",
		RequestedBy: "U123ABC456",
		ExpiresAt:   expires,
		Status:      "pending",
	}
	with := func(f func(*chat.ApprovalCard)) chat.ApprovalCard { c := base; f(&c); return c }
	tests := []struct {
		name    string
		card    chat.ApprovalCard
		context string // the context line (times as Slack date tokens, each reader's zone)
	}{
		{"approval_pending", base, "Who may approve: <@U222BBB222>, <!subteam^S0614TZR7> · Expires <!date^1772632980^{date_short_pretty} {time}|Mar 4 14:03 UTC>"},
		{"approval_pending_anyone", with(func(c *chat.ApprovalCard) { c.Approvers = ""; c.RequestedBy = "" }), "Who may approve: anyone in this conversation · Expires <!date^1772632980^{date_short_pretty} {time}|Mar 4 14:03 UTC>"},
		{"approval_approved", with(func(c *chat.ApprovalCard) { c.Status = "approved"; c.DecidedBy = "U222BBB222"; c.DecidedAt = decided }), "Approved by <@U222BBB222> · <!date^1772632350^{time}|13:52 UTC>"},
		{"approval_denied", with(func(c *chat.ApprovalCard) {
			c.Status = "denied"
			c.DecidedBy = "U222BBB222"
			c.Reason = "not during the freeze & not <today>"
			c.DecidedAt = decided
		}), "Denied by <@U222BBB222>: not during the freeze &amp; not &lt;today&gt; · <!date^1772632350^{time}|13:52 UTC>"},
		{"approval_denied_via_api", with(func(c *chat.ApprovalCard) { c.Status = "denied"; c.DecidedBy = "api-key ci"; c.DecidedAt = decided }), "Denied by api-key ci · <!date^1772632350^{time}|13:52 UTC>"},
		{"approval_expired", with(func(c *chat.ApprovalCard) { c.Status = "expired"; c.DecidedAt = expires }), "Expired · <!date^1772632980^{time}|14:03 UTC>"},
		{"approval_cancelled", with(func(c *chat.ApprovalCard) { c.Status = "cancelled"; c.DecidedAt = decided }), "Cancelled · <!date^1772632350^{time}|13:52 UTC>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msg := map[string]any{"text": ApprovalText(tt.card), "blocks": ApprovalBlocks(tt.card, nil)}
			raw := goldenJSON(t, tt.name, msg)

			// What we send parses back as Slack blocks.
			var parsed struct {
				Blocks slackapi.Blocks `json:"blocks"`
			}
			if err := json.Unmarshal(raw, &parsed); err != nil {
				t.Fatalf("golden JSON does not parse as Slack blocks: %v", err)
			}
			var ctx string
			var buttons []*slackapi.ButtonBlockElement
			for _, b := range parsed.Blocks.BlockSet {
				switch b := b.(type) {
				case *slackapi.ContextBlock:
					ctx = b.ContextElements.Elements[0].(*slackapi.TextBlockObject).Text
				case *slackapi.ActionBlock:
					for _, e := range b.Elements.ElementSet {
						buttons = append(buttons, e.(*slackapi.ButtonBlockElement))
					}
				case *slackapi.SectionBlock:
					if textLen(b.Text.Text) > MaxSectionText {
						t.Errorf("section text of %d chars", textLen(b.Text.Text))
					}
				default:
					t.Errorf("unexpected block %T", b)
				}
			}
			if ctx != tt.context {
				t.Errorf("context = %q, want %q", ctx, tt.context)
			}
			if !tt.card.Pending() {
				if len(buttons) != 0 {
					t.Errorf("decided card still has %d buttons", len(buttons))
				}
				return
			}
			if len(buttons) != 2 {
				t.Fatalf("pending card has %d buttons, want 2", len(buttons))
			}
			want := []struct {
				id    string
				style slackapi.Style
			}{{chat.ActionApprove, slackapi.StylePrimary}, {chat.ActionDeny, slackapi.StyleDanger}}
			for i, b := range buttons {
				if b.ActionID != want[i].id || b.Style != want[i].style || b.Value != tt.card.ApprovalID {
					t.Errorf("button %d = {action_id:%q style:%q value:%q}, want {%q %q %q}", i, b.ActionID, b.Style, b.Value, want[i].id, want[i].style, tt.card.ApprovalID)
				}
			}
		})
	}
}

// A click on the card we render round-trips through ParseInteraction to the
// same approval id.
func TestApprovalButtonRoundTrip(t *testing.T) {
	t.Parallel()
	card := chat.ApprovalCard{ApprovalID: "apr_0123456789abcdef", Agent: "ops", Tool: "deploy", Arguments: "{}", Status: "pending"}
	blocks := ApprovalBlocks(card, nil)
	actions := blocks[len(blocks)-1].(*slackapi.ActionBlock)
	deny := actions.Elements.ElementSet[1].(*slackapi.ButtonBlockElement)
	payload, err := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]string{"id": "U1"}, "trigger_id": "t.1",
		"container": map[string]string{"type": "message", "channel_id": "C1", "message_ts": "1.2"},
		"actions":   []map[string]string{{"type": "button", "block_id": actions.BlockID, "action_id": deny.ActionID, "value": deny.Value, "action_ts": "3.4"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	req, err := testParser.ParseInteraction(payload)
	if err != nil || req.Kind != KindAction || req.Action.ApprovalID != card.ApprovalID || req.Action.ActionID != chat.ActionDeny {
		t.Fatalf("ParseInteraction = %+v, %v", req, err)
	}
}

func TestApprovalBlocksLongArguments(t *testing.T) {
	t.Parallel()
	card := chat.ApprovalCard{ApprovalID: "apr_0123456789abcdef", Agent: "ops", Tool: "write", Arguments: strings.Repeat("<é>", 5000), Status: "pending"}
	args := ApprovalBlocks(card, nil)[1].(*slackapi.SectionBlock).Text.Text
	if n := textLen(args); n > MaxSectionText {
		t.Fatalf("arguments section is %d chars", n)
	}
	if !strings.HasPrefix(args, "```") || !strings.HasSuffix(args, "…```") {
		t.Fatalf("truncated arguments not fenced and marked: %q…", args[:20])
	}
}

// workflowArgs are GitHub MCP create_or_update_file arguments as a card
// shows them (indented, keys sorted): the content is longer than a card
// shows, and would push owner, path and repo out of view.
var workflowArgs = "{\n  \"branch\": \"main\",\n  \"content\": \"" + strings.Repeat(`on: push\n`, 500) +
	"\",\n  \"message\": \"ci: add workflow\",\n  \"owner\": \"victim\",\n  \"path\": \".github/workflows/x.yml\",\n  \"repo\": \"infra\"\n}"

// A pending card whose arguments do not fit shows what fits, says where
// they show in full, and offers Deny alone: nobody approves fields it cut
// off. Decided, it shows the outcome without the note.
func TestApprovalBlocksArgsCutGolden(t *testing.T) {
	t.Parallel()
	card := chat.ApprovalCard{ApprovalID: "apr_0123456789abcdef", Agent: "ops", Tool: "create_or_update_file", Server: "github", Arguments: workflowArgs,
		Approvers: "<@U222BBB222>", RequestedBy: "U123ABC456", ExpiresAt: time.Date(2026, 3, 4, 14, 3, 0, 0, time.UTC), Status: "pending"}
	blocks := ApprovalBlocks(card, nil)
	raw := string(goldenJSON(t, "approval_pending_args_cut", map[string]any{"text": ApprovalText(card), "blocks": blocks}))
	for _, want := range []string{"Arguments cut: ", " of 5,149 characters shown", "GET /api/v1/approvals/apr_0123456789abcdef", `"action_id": "deny"`} {
		if !strings.Contains(raw, want) {
			t.Errorf("card does not contain %q:\n%s", want, raw)
		}
	}
	for _, unwanted := range []string{`"action_id": "approve"`, "victim"} {
		if strings.Contains(raw, unwanted) {
			t.Errorf("card of cut arguments contains %q", unwanted)
		}
	}
	for _, b := range blocks {
		if s, ok := b.(*slackapi.SectionBlock); ok && textLen(s.Text.Text) > MaxSectionText {
			t.Errorf("section text of %d chars", textLen(s.Text.Text))
		}
	}
	card.Status, card.DecidedBy = "denied", "U222BBB222"
	if raw, _ := json.Marshal(ApprovalBlocks(card, nil)); strings.Contains(string(raw), "Arguments cut") || strings.Contains(string(raw), `"action_id"`) {
		t.Errorf("decided card of cut arguments = %s, want the outcome without note or buttons", raw)
	}
}

// Principal ids (slack:<team>/<user>, slack:<user>) show as mentions on a
// card, like plain Slack user ids; keys and roles as text.
func TestCardShowsPrincipals(t *testing.T) {
	t.Parallel()
	if got, want := Approvers([]string{"slack:T1/U0ANA00001", "slack:U0BOB00001", "U0CAT00001", "S0614TZR7", "key:ci-key", "role:admin", "requester"}),
		"<@U0ANA00001>, <@U0BOB00001>, <@U0CAT00001>, <!subteam^S0614TZR7>, key:ci-key, role:admin, the requester"; got != want {
		t.Errorf("Approvers = %q, want %q", got, want)
	}
	card := chat.ApprovalCard{ApprovalID: "apr_0123456789abcdef", Agent: "ops", Tool: "deploy", RequestedBy: "slack:T1/U0BOB00001",
		Status: "approved", DecidedBy: "U0ANA00001"}
	raw, err := json.Marshal(ApprovalBlocks(card, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`(requested by \u003c@U0BOB00001\u003e)`, `Approved by \u003c@U0ANA00001\u003e`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("card %s does not contain %s", raw, want)
		}
	}
	card.RequestedBy = "key:ci-key"
	if raw, _ := json.Marshal(ApprovalBlocks(card, nil)); !strings.Contains(string(raw), "(requested by key:ci-key)") {
		t.Errorf("card of a key's run: %s, want the key as text", raw)
	}
}

// Arguments cannot end the card's code block early: whatever backticks they
// hold, the block ends at its own closing fence, and the arguments read as
// they were sent.
func TestApprovalArgumentsStayInCodeBlock(t *testing.T) {
	t.Parallel()
	const rest = "\n*✅ Approved by* alice"
	tests := []struct{ name, args string }{
		{"3 backticks", "{\"cmd\": \"```" + rest + "\"}"},
		{"4 backticks", "{\"cmd\": \"````" + rest + "\"}"},
		{"5 backticks", "{\"cmd\": \"`````" + rest + "\"}"},
		{"6 backticks", "{\"cmd\": \"``````" + rest + "\"}"},
		{"7 backticks", "{\"cmd\": \"```````" + rest + "\"}"},
		{"at the opening fence", "```" + rest},
		{"at the closing fence", "echo" + rest + "```"},
		{"one at the closing fence", "echo" + rest + "`"},
		{"only backticks", "`````"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			card := chat.ApprovalCard{ApprovalID: "apr_0123456789abcdef", Agent: "ops", Tool: "shell", Arguments: tt.args, Status: "pending"}
			text := ApprovalBlocks(card, nil)[1].(*slackapi.SectionBlock).Text.Text
			// Runs of two or more backticks: only the fences.
			var runs []string
			for i := 0; i < len(text); {
				n := 0
				for i+n < len(text) && text[i+n] == '`' {
					n++
				}
				if n > 1 {
					runs = append(runs, fmt.Sprintf("%d backticks at %d", n, i))
				}
				i += max(n, 1)
			}
			if want := []string{"3 backticks at 0", fmt.Sprintf("3 backticks at %d", len(text)-3)}; !slices.Equal(runs, want) {
				t.Errorf("arguments section %q has %v, want only the fences %v", text, runs, want)
			}
			if shown := strings.ReplaceAll(text[3:len(text)-3], zeroWidthSpace, ""); shown != escapeMrkdwn(tt.args) {
				t.Errorf("arguments show as %q, want %q", shown, escapeMrkdwn(tt.args))
			}
		})
	}
}
