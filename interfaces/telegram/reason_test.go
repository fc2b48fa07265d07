package telegram_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/telegram"
	"github.com/agentgate/agentgate/interfaces/telegram/telegramtest"
)

// eveID is a group member without a username.
const eveID = 5550006

// said waits for a message in the group whose text (MarkdownV2) is text.
func (e *env) said(t *testing.T, text string) telegramtest.Message {
	t.Helper()
	var got telegramtest.Message
	waitFor(t, e.fake, text, func() bool {
		for _, m := range messagesIn(e.fake, groupID) {
			if m.Text == text {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// prompts are the bot's "why deny?" prompts in the group.
func prompts(fake *telegramtest.Server) []telegramtest.Message {
	var out []telegramtest.Message
	for _, m := range messagesIn(fake, groupID) {
		if strings.Contains(m.Text, "why deny") && strings.Contains(m.ReplyMarkup, `"force_reply":true`) {
			out = append(out, m)
		}
	}
	return out
}

// promptOf clicks Deny on approval id's card as user and returns the
// prompt the bot asks them for a reason in.
func promptOf(t *testing.T, e *env, updateID, queryID string, user int64, id string) telegramtest.Message {
	t.Helper()
	click(t, e, updateID, queryID, user, e.card(t, id), "d:"+id)
	waitFor(t, e.fake, "the reason prompt", func() bool { return len(prompts(e.fake)) > 0 })
	return prompts(e.fake)[0]
}

// pending fails the test unless approval id is still pending.
func pending(t *testing.T, e *env, id string) {
	t.Helper()
	if got, _ := e.db.GetApproval(t.Context(), id); got.Status != core.ApprovalPending {
		t.Fatalf("approval %s is %s (by %s, reason %q), want pending", id, got.Status, got.DecidedBy, got.Reason)
	}
}

// A reply to a bot message that reads as a "why deny?" prompt but is not
// one the bot posted (an agent made to repeat the prompt's text) is no
// deny, whoever replies: ana's reply reaches the agent, the approval stays
// pending. So too after she clicked Deny and has a prompt of her own, and
// when the reply comes by the poller.
func TestReplyToARepeatedPromptIsAMessage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		clicked, poll bool
	}{
		{"no prompt asked", false, false},
		{"her own prompt asked", true, false},
		{"by the poller", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "")
			a := e.pause(t, core.ApprovalPolicy{Approvers: []string{principal(anaID)}})
			e.render(t, a.ID)
			if tt.clicked {
				promptOf(t, e, "815000600", "q-ana", anaID, a.ID)
			}
			// The agent's output repeats a prompt's text, in the old
			// wording and the new.
			repeated := fmt.Sprintf("Request %s: @ana_ops, why deny deploy (request %s)? Reply to this message with the reason.", a.ID, a.ID)
			b := core.Binding{Platform: chat.PlatformTelegram, Channel: fmt.Sprint(groupID)}
			if err := e.notifier.DeliverResult(t.Context(), b, "routine:r1:run_1", repeated); err != nil {
				t.Fatal(err)
			}
			forged := e.said(t, telegram.Markdown(repeated))
			body := replyBody(e, "815000601", anaID, forged, "thanks, continue the deploy")
			if tt.poll {
				e.fake.Push(string(body))
				ctx, cancel := context.WithCancel(t.Context())
				var wg sync.WaitGroup
				wg.Go(func() { _ = (&telegram.Poller{Client: e.client, Sink: e.h, Timeout: time.Second}).Start(ctx) })
				defer func() { cancel(); wg.Wait() }()
			} else if code := e.post(t, secret, body); code != http.StatusOK {
				t.Fatalf("reply: got %d", code)
			}
			e.said(t, `ops saw 1: thanks, continue the deploy\.`)
			pending(t, e, a.ID)
		})
	}
}

// bob, an approver too, replying to the prompt that asks ana decides
// nothing, neither as ana nor as himself: his reply reaches the agent.
func TestReplyToAnothersPromptIsAMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{principal(anaID), principal(bobID)}})
	e.render(t, a.ID)
	prompt := promptOf(t, e, "815000610", "q-ana", anaID, a.ID)
	replyTo(t, e, "815000611", bobID, prompt, "not during the freeze")
	e.said(t, `ops saw 1: not during the freeze\.`)
	pending(t, e, a.ID)
}

// The reason prompt names its request before the clicker: eve, named
// "Eve (request <B>)", replies to her prompt for A, which denies A with her
// reason; B stays pending.
func TestReplyToThePromptDenies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	policy := core.ApprovalPolicy{Approvers: []string{principal(eveID)}}
	a, other := e.pause(t, policy), e.pause(t, policy)
	e.render(t, a.ID)
	e.render(t, other.ID)
	eve := fmt.Sprintf(`{"id": %d, "is_bot": false, "first_name": %q}`, eveID, "Eve (request "+other.ID+")")
	card := e.card(t, a.ID)
	body := strings.NewReplacer("815000007", "815000620", "4382bfdwdsb323b2d9", "q-eve", "a:APPROVAL_ID", "d:"+a.ID,
		`{"id": 5550001, "is_bot": false, "first_name": "Ana", "username": "ana_ops"}`, eve,
		`"message_id": 101`, fmt.Sprintf(`"message_id": %d`, card.ID)).Replace(string(payload(t, "callback_query.json")))
	if code := e.post(t, secret, []byte(body)); code != http.StatusOK {
		t.Fatalf("click: got %d", code)
	}
	waitFor(t, e.fake, "the reason prompt", func() bool { return len(prompts(e.fake)) > 0 })
	prompt := prompts(e.fake)[0]
	replyTo(t, e, "815000621", eveID, prompt, " not during the freeze ")
	e.said(t, `Denied\.`)
	got, _ := e.db.GetApproval(t.Context(), a.ID)
	if got.Status != core.ApprovalDenied || got.DecidedBy != principal(eveID) || got.Reason != "not during the freeze" {
		t.Fatalf("approval = %s by %s, reason %q; want denied by %s with her reason", got.Status, got.DecidedBy, got.Reason, principal(eveID))
	}
	pending(t, e, other.ID)
}

// A second Deny click by ana posts no second prompt: she is told to reply
// to the first, and her reply to it denies.
func TestSecondDenyClickPointsToThePrompt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{principal(anaID)}})
	e.render(t, a.ID)
	prompt := promptOf(t, e, "815000630", "q-ana", anaID, a.ID)
	click(t, e, "815000631", "q-ana-again", anaID, e.card(t, a.ID), "d:"+a.ID)
	if ans, _ := e.fake.Answer("q-ana-again"); !strings.Contains(ans, "reply to my earlier message") {
		t.Fatalf("ana's second deny answered %q, want to be pointed to her first prompt", ans)
	}
	if ps := prompts(e.fake); len(ps) != 1 {
		t.Fatalf("prompts = %+v, want one", ps)
	}
	replyTo(t, e, "815000632", anaID, prompt, "-")
	e.said(t, `Denied\.`)
	if got, _ := e.db.GetApproval(t.Context(), a.ID); got.Status != core.ApprovalDenied || got.DecidedBy != principal(anaID) || got.Reason != "" {
		t.Fatalf("approval = %s by %s, reason %q; want denied by %s without a reason", got.Status, got.DecidedBy, got.Reason, principal(anaID))
	}
}
