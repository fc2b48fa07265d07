package discord_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/discord"
	"github.com/agentgate/agentgate/interfaces/discord/discordtest"
	"github.com/agentgate/agentgate/store/sqlite"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from %s (run with -update if intended):\n%s", name, path, got)
	}
}

// TestPayloadGolden pins what is sent to Discord: the approval card's
// message (pending, with buttons; decided, without) and the application
// commands registered at start.
func TestPayloadGolden(t *testing.T) {
	t.Parallel()
	card := chat.ApprovalCard{ApprovalID: "apr_0123456789abcdef", Agent: "ops", Tool: "deploy",
		Arguments: "{\n  \"env\": \"production\",\n  \"service\": \"web\"\n}", Approvers: discord.Approvers([]string{"500000000000000001", "requester"}),
		RequestedBy: "500000000000000002", ExpiresAt: time.Date(2026, 12, 2, 16, 15, 0, 0, time.UTC), Status: "pending"}
	send := func(m discord.Message) discordgo.MessageSend {
		return discordgo.MessageSend{Content: m.Content, Components: m.Components}
	}
	golden(t, "approval_pending", send(discord.ApprovalMessage(card)))
	card.Status, card.DecidedBy, card.Reason = "denied", "500000000000000001", "not during the freeze"
	golden(t, "approval_denied", send(discord.ApprovalMessage(card)))
	golden(t, "commands", discord.Commands())
}

// workflowArgs are GitHub MCP create_or_update_file arguments as a card
// shows them (indented, keys sorted): the content is longer than a card
// shows, and would push owner, path and repo out of view.
var workflowArgs = "{\n  \"branch\": \"main\",\n  \"content\": \"" + strings.Repeat(`on: push\n`, 500) +
	"\",\n  \"message\": \"ci: add workflow\",\n  \"owner\": \"victim\",\n  \"path\": \".github/workflows/x.yml\",\n  \"repo\": \"infra\"\n}"

// TestPayloadArgsCutGolden pins the pending card of arguments over what a
// card shows: what fits, the note saying where they show in full, and Deny
// alone, so nobody approves fields it cut off. Decided, it shows the
// outcome without the note.
func TestPayloadArgsCutGolden(t *testing.T) {
	t.Parallel()
	card := chat.ApprovalCard{ApprovalID: "apr_0123456789abcdef", Agent: "ops", Tool: "create_or_update_file", Server: "github", Arguments: workflowArgs,
		Approvers: discord.Approvers([]string{"500000000000000001"}), RequestedBy: "500000000000000002",
		ExpiresAt: time.Date(2026, 12, 2, 16, 15, 0, 0, time.UTC), Status: "pending"}
	m := discord.ApprovalMessage(card)
	golden(t, "approval_pending_args_cut", discordgo.MessageSend{Content: m.Content, Components: m.Components})
	const note = "Arguments cut: 1,198 of 5,149 characters shown. Approve only where they show in full: agentgate approvals list, or GET /api/v1/approvals/apr\\_0123456789abcdef."
	if !strings.Contains(m.Content, note) || strings.Contains(m.Content, "victim") {
		t.Errorf("card = %q, want the note %q and not the arguments it cut", m.Content, note)
	}
	raw, _ := json.Marshal(m.Components)
	if strings.Contains(string(raw), "agentgate:approve:") || !strings.Contains(string(raw), "agentgate:deny:apr_0123456789abcdef") {
		t.Errorf("buttons = %s, want Deny alone", raw)
	}
	if n := len([]rune(m.Content)); n > 2000 {
		t.Errorf("card is %d characters, over Discord's 2,000", n)
	}
	card.Status, card.DecidedBy = "denied", "500000000000000001"
	if m := discord.ApprovalMessage(card); strings.Contains(m.Content, "Arguments cut") || len(m.Components) != 0 {
		t.Errorf("decided card = %+v, want the outcome without note or buttons", m)
	}
}

// TestCardEscapesHostileText pins the card of a request whose free-form
// fields (tool name, agent, decider's name, reason) carry Markdown: it must
// show as text on the card's lines, not as a second line, bold or a link
// that approvers would read as the gateway's.
func TestCardEscapesHostileText(t *testing.T) {
	t.Parallel()
	const tool = "Read`\n**✅ Approved by admin** [details](https://evil.example)\n`x"
	pending := chat.ApprovalCard{ApprovalID: "apr_0123456789abcdef", Agent: "ops**\n# [docs](https://evil.example) <#500000000000000003>",
		Tool: tool, Arguments: "{}", Status: "pending"}
	denied := pending
	denied.Status, denied.DecidedBy = "denied", "admin\r\n**✅ Approved** [by](https://evil.example)"
	denied.Reason = "ok\n# Approved [details](https://evil.example)\u2028> quoted </agentgate approvals:1>"
	for _, tc := range []struct {
		name  string
		card  chat.ApprovalCard
		lines int // the header, the arguments' fence (3), and the reason
		bold  int // the fixed ** of the header
	}{
		{name: "approval_hostile_pending", card: pending, lines: 4, bold: 4},
		{name: "approval_hostile_denied", card: denied, lines: 5, bold: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := discord.ApprovalMessage(tc.card)
			golden(t, tc.name, discordgo.MessageSend{Content: m.Content, Components: m.Components})
			lines := strings.Split(m.Content, "\n")
			if len(lines) != tc.lines || !strings.HasPrefix(lines[1], "```json") {
				t.Errorf("card has %d lines, want %d with the arguments on the second:\n%s", len(lines), tc.lines, m.Content)
			}
			if n := strings.Count(lines[0], "`"); n != 2 {
				t.Errorf("header %q has %d backticks, want 2: the tool name left its code span", lines[0], n)
			}
			text := outsideCode(m.Content)
			for _, c := range []struct {
				mark byte
				want int
			}{{'*', tc.bold * 2}, {'[', 0}, {']', 0}, {'<', 0}, {'>', 0}} {
				if n := unescaped(text, c.mark); n != c.want {
					t.Errorf("%d unescaped %q outside code, want %d, in:\n%s", n, c.mark, c.want, text)
				}
			}
		})
	}
}

// outsideCode is the Markdown of s outside its code block and code spans.
func outsideCode(s string) string {
	if i := strings.Index(s, "```"); i >= 0 {
		if j := strings.Index(s[i+3:], "```"); j >= 0 {
			s = s[:i] + s[i+3+j+3:]
		}
	}
	var b strings.Builder
	for i, part := range strings.Split(s, "`") {
		if i%2 == 0 {
			b.WriteString(part)
		}
	}
	return b.String()
}

// unescaped counts the marks c in s that no backslash escapes.
func unescaped(s string, c byte) int {
	n, slashes := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\':
			slashes++
			continue
		case s[i] == c && slashes%2 == 0:
			n++
		}
		slashes = 0
	}
	return n
}

func TestCustomID(t *testing.T) {
	t.Parallel()
	id := discord.CustomID(chat.ActionDeny, "apr_0123456789abcdef")
	if a, got, ok := discord.ParseCustomID(id); !ok || a != chat.ActionDeny || got != "apr_0123456789abcdef" || len(id) > 100 {
		t.Errorf("ParseCustomID(%q) = %q %q %v", id, a, got, ok)
	}
	for _, bad := range []string{"", "agentgate:", "agentgate:approve:", "agentgate:delete:apr_1", "other:approve:apr_1",
		"agentgate:approve:" + strings.Repeat("x", 100)} {
		if _, _, ok := discord.ParseCustomID(bad); ok {
			t.Errorf("ParseCustomID(%q) accepted", bad)
		}
	}
}

func FuzzParseCustomID(f *testing.F) {
	f.Add("agentgate:approve:apr_0123456789abcdef")
	f.Add("agentgate:deny:x:y")
	f.Fuzz(func(t *testing.T, s string) {
		action, id, ok := discord.ParseCustomID(s)
		if ok && discord.CustomID(action, id) != s {
			t.Errorf("ParseCustomID(%q) = %q %q, which does not make it again", s, action, id)
		}
	})
}

func TestSplit(t *testing.T) {
	t.Parallel()
	code := "```\n" + strings.Repeat("line of code\n", 300) + "```"
	for name, text := range map[string]string{
		"short": "hello", "words": strings.Repeat("word ", 1000), "one long word": strings.Repeat("é", 4500), "code block": code,
	} {
		parts := discord.Split(text, discord.MaxMessage)
		for i, p := range parts {
			if n := len([]rune(p)); n > discord.MaxMessage || n == 0 {
				t.Errorf("%s: part %d has %d characters", name, i, n)
			}
			if strings.Count(p, "```")%2 != 0 {
				t.Errorf("%s: part %d leaves a code block open", name, i)
			}
		}
		if name == "short" && (len(parts) != 1 || parts[0] != "hello") {
			t.Errorf("short: %q", parts)
		}
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("hello world\n\nsecond paragraph", 20)
	f.Add("```\ncode\n```", 10)
	f.Fuzz(func(t *testing.T, text string, max int) {
		if max < 10 || max > 4000 {
			return
		}
		for _, p := range discord.Split(text, max) {
			if n := len([]rune(p)); n > max {
				t.Errorf("part of %d characters > %d", n, max)
			}
		}
	})
}

// FuzzInteraction feeds the signed endpoint's parser untrusted bodies: it
// must answer, never panic.
func FuzzInteraction(f *testing.F) {
	f.Add([]byte(`{"type":1}`))
	f.Add([]byte(`{"type":3,"data":{"custom_id":"agentgate:approve:apr_1","component_type":2},"member":{"user":{"id":"1"}}}`))
	f.Add([]byte(`{"type":2,"data":{"name":"agentgate","options":[{"name":"run","type":1,"options":[{"name":"routine","type":3,"value":7}]}]}}`))
	// The deny modal's submission, and shapes of it Discord never sends.
	f.Add([]byte(`{"type":5,"data":{"custom_id":"agentgate:deny:apr_1","components":[{"type":1,"components":[{"type":4,"custom_id":"reason","value":"no"}]}]},"member":{"user":{"id":"1"}},"message":{"id":"9"}}`))
	f.Add([]byte(`{"type":5,"data":{"custom_id":"agentgate:deny:apr_1","components":[{"type":4,"custom_id":"reason"}]}}`))
	f.Add([]byte(`{"type":5,"data":{"components":7}}`))
	h, err := discord.NewHandler(discord.HandlerConfig{Threads: chat.Threads{Sessions: nil0{}}, Intake: chat.Intake{Engine: &recordSubmitter{}, DefaultAgent: "ops", Inbox: testInbox(f)}, Client: mustClient(f)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var i discordgo.Interaction
		if json.Unmarshal(body, &i) != nil {
			return
		}
		_, _, _ = h.Interaction(t.Context(), &i)
	})
}

func mustClient(tb testing.TB) *discord.Client {
	c, err := discord.NewClient(discord.ClientConfig{Token: "t", APIURL: "http://127.0.0.1:1/api/v10"})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// testInbox is an inbox on SQLite for a handler whose messages a test
// does not process.
func testInbox(tb testing.TB) core.Inbox {
	tb.Helper()
	db, err := sqlite.Open(tb.Context(), filepath.Join(tb.TempDir(), "db.sqlite"), sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

type nil0 struct{}

func (nil0) GetSession(context.Context, string) (core.Session, error) {
	return core.Session{}, core.ErrNotFound
}

func TestClientAPIURL(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"discord.com/api", "ftp://x/api", "http://"} {
		if _, err := discord.NewClient(discord.ClientConfig{Token: "t", APIURL: bad}); err == nil || !strings.Contains(err.Error(), "DISCORD_API_URL") {
			t.Errorf("APIURL %q: %v", bad, err)
		}
	}
}

// Without DISCORD_PUBLIC_KEY interactions come over the Gateway only: every
// HTTP request is refused, however signed.
func TestInteractionsOverHTTPOff(t *testing.T) {
	t.Parallel()
	h, err := discord.NewHandler(discord.HandlerConfig{
		Threads: chat.Threads{Sessions: nil0{}},
		Intake:  chat.Intake{Engine: &recordSubmitter{}, DefaultAgent: "ops", Inbox: testInbox(t)}, Client: mustClient(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, _, err := discordtest.NewKey().Post(srv.URL, map[string]any{"type": 1})
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("PING without a public key: %v %v, want 401", resp.Status, err)
	}
	if _, err := discord.NewHandler(discord.HandlerConfig{
		Threads: chat.Threads{Sessions: nil0{}},
		Intake:  chat.Intake{Engine: &recordSubmitter{}, DefaultAgent: "ops", Inbox: testInbox(t)}, PublicKey: "nothex", Client: mustClient(t),
	}); err == nil || !strings.Contains(err.Error(), "DISCORD_PUBLIC_KEY") {
		t.Errorf("a malformed public key: %v", err)
	}
}

// Principal ids (discord:<user>) show as mentions on a card, like plain
// Discord ids; keys and roles as text.
func TestCardShowsPrincipals(t *testing.T) {
	t.Parallel()
	if got, want := discord.Approvers([]string{"discord:500000000000000001", "500000000000000002", "key:ci-key", "role:admin", "requester"}),
		`<@500000000000000001>, <@500000000000000002>, key:ci-key, role:admin, the requester`; got != want {
		t.Errorf("Approvers = %q, want %q", got, want)
	}
	card := chat.ApprovalCard{ApprovalID: "apr_0123456789abcdef", Agent: "ops", Tool: "deploy", RequestedBy: "discord:500000000000000002", Status: "pending"}
	if m := discord.ApprovalMessage(card); !strings.Contains(m.Content, "Requested by <@500000000000000002>") {
		t.Errorf("card %q, want the requester as a mention", m.Content)
	}
	card.RequestedBy = "key:ci-key"
	if m := discord.ApprovalMessage(card); !strings.Contains(m.Content, "Requested by key:ci-key") {
		t.Errorf("card of a key's run %q, want the key as text", m.Content)
	}
}

// noRead is a request body that must not be read.
type noRead struct{ t *testing.T }

func (b noRead) Read([]byte) (int, error) {
	b.t.Error("the body was read before the signature headers were checked")
	return 0, io.EOF
}

// Requests without signature headers, with a malformed signature or older
// than 5 minutes are refused (401) before a byte of their body is read.
func TestInteractionHeadersCheckedFirst(t *testing.T) {
	t.Parallel()
	key := discordtest.NewKey()
	h, err := discord.NewHandler(discord.HandlerConfig{
		Threads: chat.Threads{Sessions: nil0{}},
		Intake:  chat.Intake{Engine: &recordSubmitter{}, DefaultAgent: "ops", Inbox: testInbox(t)}, PublicKey: key.PublicHex(), Client: mustClient(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	stale := strconv.FormatInt(time.Now().Add(-6*time.Minute).Unix(), 10)
	for name, hdr := range map[string][2]string{
		"unsigned":  {"", ""},
		"malformed": {"zz", strconv.FormatInt(time.Now().Unix(), 10)},
		"stale":     {strings.Repeat("ab", 64), stale},
	} {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/discord/interactions", noRead{t})
		req.ContentLength = 1 << 20
		req.Header.Set("X-Signature-Ed25519", hdr[0])
		req.Header.Set("X-Signature-Timestamp", hdr[1])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", name, w.Code, w.Body)
		}
	}
	// Well-formed fresh headers on a body declared over MaxBodyBytes: 413,
	// and still not a byte read.
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/discord/interactions", noRead{t})
	req.ContentLength = discord.MaxBodyBytes + 1
	req.Header.Set("X-Signature-Ed25519", strings.Repeat("ab", 64))
	req.Header.Set("X-Signature-Timestamp", strconv.FormatInt(time.Now().Unix(), 10))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body declared over the limit: %d %s, want 413", w.Code, w.Body)
	}
	// A replay of a correctly signed interaction captured 6 minutes ago.
	body := []byte(`{"type":1}`)
	req = httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/discord/interactions", bytes.NewReader(body))
	key.SignAt(req, body, time.Now().Add(-6*time.Minute))
	w = httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "old") {
		t.Errorf("a replayed interaction: %d %s, want 401 saying it is too old", w.Code, w.Body)
	}
}
