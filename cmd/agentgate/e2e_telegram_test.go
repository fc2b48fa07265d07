package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"

	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/interfaces/telegram/telegramtest"
)

// The Telegram side of the gateway, checked from outside: a real `agentgate
// serve` against the fake Bot API (TELEGRAM_API_URL), fed updates shaped
// like Telegram's, on the webhook and by long polling.

const (
	tgToken  = "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11"
	tgSecret = "tg-secret_0123456789"
	tgGroup  = -1001234567890
	tgAna    = 5550001 // the tool's approver
	tgBob    = 5550002 // asks, may not approve
)

func telegramConfig(t *testing.T, toolURL string) string {
	t.Helper()
	return writeFile(t, "agentgate.yaml", fmt.Sprintf(`
agents:
  ops:
    model: {provider: demo}
    tools: [deploy]
tools:
  deploy:
    description: Deploy a service to an environment.
    http: {url: %q, method: POST, timeout: 10s}
    parameters:
      type: object
      properties:
        service: {type: string}
        env: {type: string, enum: [staging, production]}
      required: [service, env]
    approval: {required: true, timeout: 15m, approvers: ["%d"]}
routines:
  standup:
    agent: ops
    schedule: "0 9 * * 1-5"
    input: Say hello to the team.
    deliver_to: "telegram:%d"
    enabled: false
interfaces:
  telegram:
    default_agent: ops
`, toolURL, tgAna, tgGroup))
}

// tgMention is a group message from user that @mentions the bot.
func tgMention(updateID int64, msgID int, user int64, text string) []byte {
	b, _ := json.Marshal(map[string]any{"update_id": updateID, "message": map[string]any{
		"message_id": msgID, "date": 1764686400, "text": "@agentgate_bot " + text,
		"from":     map[string]any{"id": user, "is_bot": false, "first_name": "User"},
		"chat":     map[string]any{"id": tgGroup, "title": "Ops", "type": "supergroup"},
		"entities": []map[string]any{{"offset": 0, "length": 14, "type": "mention"}},
	}})
	return b
}

// tgClick is a callback_query: user pressed a button of the bot's message.
func tgClick(updateID int64, queryID string, user int64, msg telegramtest.Message, data string) []byte {
	return tgClickIn(tgGroup, updateID, queryID, user, msg, data)
}

// tgClickIn is tgClick on a message of chat (Bot API clients may send any
// callback data from any chat).
func tgClickIn(chat int64, updateID int64, queryID string, user int64, msg telegramtest.Message, data string) []byte {
	b, _ := json.Marshal(map[string]any{"update_id": updateID, "callback_query": map[string]any{
		"id": queryID, "chat_instance": "-8512347651234", "data": data,
		"from": map[string]any{"id": user, "is_bot": false, "first_name": "User"},
		"message": map[string]any{"message_id": msg.ID, "date": 1764686401, "text": msg.Text,
			"from": map[string]any{"id": 7000000001, "is_bot": true, "first_name": "agentgate"},
			"chat": map[string]any{"id": chat, "title": "Ops", "type": "supergroup"}},
	}})
	return b
}

func (g *gateway) telegramPost(secret string, body []byte) int {
	g.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.base+"/telegram/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// startTelegramGateway runs the binary against a fake Bot API, with env
// added to the TELEGRAM_* settings.
func startTelegramGateway(t *testing.T, env ...string) (*telegramtest.Server, *toolServer, *gateway) {
	t.Helper()
	fake := telegramtest.New(tgToken)
	t.Cleanup(fake.Close) // after the gateway is killed: Close waits for its long poll
	tool := newToolServer(t)
	g := startGateway(t, gatewayOptions{config: telegramConfig(t, tool.URL), env: append(env,
		"TELEGRAM_BOT_TOKEN="+tgToken, "TELEGRAM_API_URL="+fake.URL)})
	return fake, tool, g
}

func tgMessages(fake *telegramtest.Server) string { return fmt.Sprintf("%+v", fake.Messages()) }

// tgCard waits for the approval card and returns it with its Approve
// button's callback data.
func tgCard(t *testing.T, fake *telegramtest.Server) (card telegramtest.Message, approve string) {
	t.Helper()
	eventually(t, "the approval card", func() (bool, string) {
		for _, m := range fake.Messages() {
			if strings.Contains(m.ReplyMarkup, "callback_data") {
				card = m
				return true, ""
			}
		}
		return false, tgMessages(fake)
	})
	var kb models.InlineKeyboardMarkup
	if err := json.Unmarshal([]byte(card.ReplyMarkup), &kb); err != nil || len(kb.InlineKeyboard) == 0 || len(kb.InlineKeyboard[0]) != 2 {
		t.Fatalf("keyboard %s: %v", card.ReplyMarkup, err)
	}
	return card, kb.InlineKeyboard[0][0].CallbackData
}

func TestTelegramEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	fake, tool, g := startTelegramGateway(t, "TELEGRAM_WEBHOOK_SECRET="+tgSecret)
	if !strings.Contains(fake.Commands(), `"command":"run"`) {
		t.Errorf("setMyCommands = %q, want the bot's commands", fake.Commands())
	}

	body := tgMention(900001, 311, tgBob, "deploy web to staging")
	for _, bad := range []string{"", "not-the-secret"} {
		if status := g.telegramPost(bad, body); status != http.StatusUnauthorized {
			t.Errorf("secret %q: status %d, want 401", bad, status)
		}
	}
	for range 2 { // Telegram's retry of the same update
		if status := g.telegramPost(tgSecret, body); status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
	}
	card, approve := tgCard(t, fake)

	// Bob may not approve: the callback query says so, nothing changes.
	g.telegramPost(tgSecret, tgClick(900002, "q-bob", tgBob, card, approve))
	eventually(t, "the refusal", func() (bool, string) {
		a, ok := fake.Answer("q-bob")
		return ok && strings.Contains(a, "may not decide"), a
	})
	cards := 0
	for _, m := range fake.Messages() {
		if strings.Contains(m.ReplyMarkup, "callback_data") {
			cards++
		}
	}
	if cards != 1 {
		t.Fatalf("%d approval cards for one update delivered twice, want 1: %s", cards, tgMessages(fake))
	}
	if ap, _ := fake.Answer("q-bob"); len(tool.Requests()) != 0 {
		t.Fatalf("tool called after a refused click (%q)", ap)
	}

	// A forged callback: Ana (an approver) sends the card's callback data
	// from another chat. It decides nothing, the card stays as it was, and
	// the refusal is in the audit log.
	g.telegramPost(tgSecret, tgClickIn(-1009999999999, 900004, "q-forged", tgAna, card, approve))
	eventually(t, "the forged callback refused", func() (bool, string) {
		a, ok := fake.Answer("q-forged")
		return ok && strings.Contains(a, "may not decide"), a
	})
	for _, m := range fake.Messages() {
		if m.ID == card.ID && (m.Edits > 0 || !strings.Contains(m.ReplyMarkup, "callback_data")) {
			t.Fatalf("the forged callback changed the card: %+v", m)
		}
	}
	var audit struct {
		Items []core.AuditEntry `json:"items"`
	}
	g.json("GET", "/api/v1/audit?action=approval.refused&principal=telegram:"+strconv.FormatInt(tgAna, 10), nil, http.StatusOK, &audit)
	if len(audit.Items) != 1 || !strings.Contains(audit.Items[0].Detail, "card") {
		t.Fatalf("audit of the forged callback = %+v", audit.Items)
	}
	if len(tool.Requests()) != 0 {
		t.Fatal("tool called after a forged callback")
	}

	// The gateway dies between the keyboard and the click; after the restart
	// Ana approves: the card is edited to the outcome, the tool runs once,
	// the answer is posted.
	g.kill()
	g.start()
	g.telegramPost(tgSecret, tgClick(900003, "q-ana", tgAna, card, approve))
	eventually(t, "the card edited and the answer", func() (bool, string) {
		ms := fake.Messages()
		edited := false
		for _, m := range ms {
			edited = edited || m.ID == card.ID && m.Edits > 0 && strings.Contains(m.Text, "Approved") && !strings.Contains(m.ReplyMarkup, "callback_data")
		}
		return edited && len(ms) >= 2, tgMessages(fake)
	})
	if n := len(tool.Requests()); n != 1 {
		t.Fatalf("tool called %d times, want 1", n)
	}
	// The restarted process counted its Bot API calls and how long the
	// run's steps waited for a worker; every update it stored was processed.
	status, metrics := g.do("GET", "/metrics", nil)
	for _, want := range []string{`agentgate_platform_requests_total{outcome="ok",platform="telegram"}`,
		`agentgate_queue_wait_seconds_count{kind="run"}`, "\nagentgate_queue_oldest_seconds ",
		"\n" + `agentgate_inbox_waiting{platform="telegram"} 0` + "\n", "\n" + `agentgate_inbox_oldest_seconds{platform="telegram"} 0` + "\n"} {
		if status != http.StatusOK || !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics (%d) lacks %s", status, want)
		}
	}
}

func TestTelegramPollingEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	fake, _, g := startTelegramGateway(t)
	if status := g.telegramPost(tgSecret, tgMention(1, 1, tgBob, "hi")); status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
		t.Errorf("webhook without TELEGRAM_WEBHOOK_SECRET: status %d, want it not served", status)
	}
	fake.Push(string(tgMention(910001, 400, tgBob, "hello there")))
	fake.Push(`{"update_id":910002,"message":{"message_id":401,"date":1764686400,"text":"/help","from":{"id":5550002,"is_bot":false,"first_name":"Bob"},"chat":{"id":-1001234567890,"title":"Ops","type":"supergroup"},"entities":[{"offset":0,"length":5,"type":"bot_command"}]}}`)
	eventually(t, "the answer and the help", func() (bool, string) {
		return len(fake.Messages()) == 2, tgMessages(fake)
	})
	eventually(t, "both updates confirmed", func() (bool, string) {
		o := fake.Offsets()
		return len(o) > 0 && o[len(o)-1] == 910003, fmt.Sprint(o)
	})

	// A routine delivers to telegram:<chat>.
	g.json("POST", "/api/v1/routines/standup/trigger", nil, http.StatusAccepted, nil)
	eventually(t, "the routine's result in the group", func() (bool, string) {
		return len(fake.Messages()) == 3, tgMessages(fake)
	})
}
