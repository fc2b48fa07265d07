package telegram_test

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/telegram"
	"github.com/agentgate/agentgate/interfaces/telegram/telegramtest"
)

const (
	cleoID     = 5550004 // in the group, without a username
	daveID     = 5550005 // in the group, not an approver
	strangerID = 5550009 // in no chat the bot is in
)

// A card names its approvers as the chat shows them: @handle, else first
// and last name with the id, else a mention; a second card in the chat, and a refusal,
// ask Telegram nothing more.
func TestCardNamesApprovers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.fake.Join(groupID, telegramtest.User{ID: cleoID, FirstName: "Cleo", LastName: "Park"})
	e.fake.Join(groupID, telegramtest.User{ID: daveID, FirstName: "Dave"})
	policy := core.ApprovalPolicy{Approvers: []string{principal(anaID), fmt.Sprint(bobID), principal(cleoID), principal(strangerID)}}
	const want = `Who may decide: @ana\_ops, @bob\_dev, Cleo Park \(id 5550004\), [Telegram user](tg://user?id=5550009)` + "\n"

	first := e.pause(t, policy)
	e.render(t, first.ID)
	if got := e.card(t, first.ID).Text; !strings.Contains(got, want) {
		t.Fatalf("card = %q, want %q", got, want)
	}
	lookups := e.fake.Calls("getChatMember")
	if lookups != 4 {
		t.Fatalf("getChatMember calls for the first card = %d, want 4 (one per approver)", lookups)
	}

	second := e.pause(t, policy)
	e.render(t, second.ID)
	card := e.card(t, second.ID)
	if !strings.Contains(card.Text, want) {
		t.Fatalf("second card = %q, want %q", card.Text, want)
	}
	click(t, e, "815000020", "q-dave", daveID, card, "a:"+second.ID)
	if ans, _ := e.fake.Answer("q-dave"); !strings.Contains(ans, "Who may: @ana_ops, @bob_dev, Cleo Park (id 5550004), a Telegram user.") {
		t.Fatalf("dave's refusal = %q, want it to name who may decide, in plain text", ans)
	}
	if n := e.fake.Calls("getChatMember"); n != lookups {
		t.Fatalf("getChatMember calls = %d after a second card and a refusal in the chat, want still %d", n, lookups)
	}
}

// The decided card names a decider known only by id (an API decision by a
// Telegram principal) as the chat shows them; a name that looks like an id
// is shown as written, never turned into a mention of that id's user.
func TestDecidedCardNamesTheDecider(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, by, byName, want string
	}{
		{"id only", principal(bobID), "", `Denied* by @bob\_dev`},
		{"id not in the chat", principal(strangerID), "", `Denied* by [Telegram user](tg://user?id=5550009)`},
		{"name of digits", principal(cleoID), "5550001", `Denied* by 5550001`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "")
			a := e.pause(t, core.ApprovalPolicy{Approvers: []string{principal(bobID), principal(cleoID), principal(strangerID)}})
			e.render(t, a.ID)
			if _, err := e.db.DecideApproval(t.Context(), a.ID, core.Decision{Status: core.ApprovalDenied, By: c.by, ByName: c.byName,
				Via: "api", At: time.Now().UTC()}); err != nil {
				t.Fatal(err)
			}
			e.render(t, a.ID)
			if got := e.card(t, a.ID).Text; !strings.Contains(got, c.want) || c.byName != "" && strings.Contains(got, "tg://") {
				t.Fatalf("decided card = %q, want %q", got, c.want)
			}
		})
	}
}

// Should Telegram refuse a mention (a user the bot may not mention), the
// card is posted once, naming that user in plain text.
func TestCardWithoutTheMentionTelegramRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.fake.RefuseStrangerMentions()
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{principal(anaID), principal(strangerID)}})
	e.render(t, a.ID)
	cards := messagesIn(e.fake, groupID)
	if len(cards) != 1 || !strings.Contains(cards[0].Text, `Who may decide: @ana\_ops, a Telegram user`+"\n") || strings.Contains(cards[0].Text, "tg://") {
		t.Fatalf("cards = %+v, want one naming ana and a Telegram user, without a mention", cards)
	}
}

// testClock is a clock a test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *testClock) advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// Names asks Telegram again about a name after an hour, about a user it
// has no name for after five minutes, and about nobody in between.
func TestNamesCache(t *testing.T) {
	t.Parallel()
	fake := telegramtest.New(token)
	t.Cleanup(fake.Close)
	fake.Join(groupID, telegramtest.User{ID: anaID, FirstName: "Ana", Username: "ana_ops"})
	clock := &testClock{now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	c, err := telegram.NewClient(telegram.ClientConfig{Token: token, APIURL: fake.URL, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		after   time.Duration // since the step before
		lookups int           // getChatMember calls so far
	}{
		{0, 2},
		{4 * time.Minute, 2},  // both cached
		{2 * time.Minute, 3},  // 6 min: the stranger asked about again
		{3 * time.Minute, 3},  // 9 min: both cached
		{50 * time.Minute, 4}, // 59 min: the stranger again, ana still cached
		{2 * time.Minute, 5},  // 61 min: ana again, the stranger cached since 59
	} {
		clock.advance(step.after)
		got := c.Names(t.Context(), groupID, []int64{anaID, strangerID})
		if want := map[int64]string{anaID: "@ana_ops"}; !maps.Equal(got, want) {
			t.Fatalf("at %s: Names = %v, want %v", clock.Now().Format("15:04"), got, want)
		}
		if n := fake.Calls("getChatMember"); n != step.lookups {
			t.Fatalf("at %s: getChatMember calls = %d, want %d", clock.Now().Format("15:04"), n, step.lookups)
		}
	}
}

// A Bot API that does not answer costs a message NameTimeout in all, not
// per user, and leaves its users unnamed.
func TestNamesTimeout(t *testing.T) {
	t.Parallel()
	fake := telegramtest.New(token)
	t.Cleanup(fake.Close)
	fake.Join(groupID, telegramtest.User{ID: anaID, FirstName: "Ana", Username: "ana_ops"})
	fake.Stall("getChatMember")
	c, err := telegram.NewClient(telegram.ClientConfig{Token: token, APIURL: fake.URL, NameTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Names(t.Context(), groupID, []int64{anaID, bobID, cleoID}); len(got) != 0 {
		t.Fatalf("Names = %v with no answer from Telegram, want none", got)
	}
	// One budget for the whole message: the stalled first lookup used it up.
	if n := fake.Calls("getChatMember"); n != 1 {
		t.Fatalf("getChatMember calls = %d, want 1 within the 50ms budget", n)
	}
}

// A user Telegram will not name in a chat (getChatMember: user not found)
// is named as their last update to the bot showed them: the card asks for
// them and names their decision by id as @username, not as a bare mention,
// without asking Telegram.
func TestNamesSeenOnUpdates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	hello := strings.NewReplacer("5550001", fmt.Sprint(strangerID), "ana_ops", "sam_ext", `"Ana"`, `"Sam"`).
		Replace(string(payload(t, "private_message.json")))
	if code := e.post(t, secret, []byte(hello)); code != http.StatusOK {
		t.Fatalf("message: got %d", code)
	}
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{principal(strangerID)}})
	e.render(t, a.ID)
	if got := e.card(t, a.ID).Text; !strings.Contains(got, `Who may decide: @sam\_ext`+"\n") {
		t.Fatalf("card = %q, want it to name the approver @sam_ext", got)
	}
	if _, err := e.db.DecideApproval(t.Context(), a.ID, core.Decision{Status: core.ApprovalApproved, By: principal(strangerID),
		Via: "api", At: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	e.render(t, a.ID)
	if got := e.card(t, a.ID).Text; !strings.Contains(got, `Approved* by @sam\_ext`) || strings.Contains(got, "tg://") {
		t.Fatalf("decided card = %q, want it approved by @sam_ext", got)
	}
	if n := e.fake.Calls("getChatMember"); n != 0 {
		t.Fatalf("getChatMember calls = %d, want none for a user seen on an update", n)
	}
}
