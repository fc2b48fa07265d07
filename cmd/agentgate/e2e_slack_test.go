package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/interfaces/slack/slacktest"
)

// The Slack side of the gateway, checked from outside: a real `agentgate
// serve` against the fake Slack Web API (SLACK_API_URL), fed signed
// requests shaped like Slack's.

const (
	slackSecret  = "8f742231b10e8888abcd99yyyzzz85a5"
	slackChannel = "C0OPS00001"
	slackAna     = "U0ANA00001" // the tool's approver
	slackBob     = "U0BOB00001" // asks, may not approve
)

func slackConfig(t *testing.T, toolURL string) string {
	t.Helper()
	return chatConfig(t, toolURL, slackAna, "slack")
}

func startSlackGateway(t *testing.T, fake *slacktest.Server, toolURL string, env ...string) *gateway {
	t.Helper()
	if len(env) == 0 {
		env = []string{"SLACK_SIGNING_SECRET=" + slackSecret}
	}
	return startGateway(t, gatewayOptions{config: slackConfig(t, toolURL), env: append(env,
		"SLACK_BOT_TOKEN="+fake.Token, "SLACK_API_URL="+fake.URL)})
}

// slackPost sends body to /slack/events signed at ts (zero: now) with extra
// headers and returns the status and the answer.
func (g *gateway) slackPost(body []byte, ts time.Time, header http.Header) (int, []byte) {
	g.t.Helper()
	if ts.IsZero() {
		ts = time.Now()
	}
	h := http.Header{}
	if bytes.HasPrefix(body, []byte("{")) {
		h.Set("Content-Type", "application/json")
	} else {
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	h.Set("X-Slack-Request-Timestamp", fmt.Sprint(ts.Unix()))
	h.Set("X-Slack-Signature", slacktest.Signature(slackSecret, body, ts))
	for k, v := range header {
		h[k] = v
	}
	req, err := http.NewRequest(http.MethodPost, g.base+"/slack/events", bytes.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header = h
	resp, err := httpClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes()
}

// mentionEvent is an Events API event_callback: the app_mention (or the
// message event Slack sends for the same post) by user in the channel.
func mentionEvent(eventType, eventID, user, text, ts string) []byte {
	ev := map[string]any{
		"token": "ZZZZZZWSxiZZZ2yIvs3peJ", "team_id": slacktest.DefaultTeamID, "api_app_id": "A0AGENTGATE",
		"type": "event_callback", "event_id": eventID, "event_time": 1700000000,
		"authorizations": []map[string]any{{"team_id": slacktest.DefaultTeamID, "user_id": slacktest.DefaultUserID, "is_bot": true}},
		"event": map[string]any{
			"type": eventType, "user": user, "text": "<@" + slacktest.DefaultUserID + "> " + text,
			"ts": ts, "channel": slackChannel, "event_ts": ts, "team": slacktest.DefaultTeamID,
			"channel_type": "channel",
		},
	}
	b, _ := json.Marshal(ev)
	return b
}

// buttonClick is the form Slack posts for a click on an approval card.
func buttonClick(user, action string, card slacktest.Message, approvalID string) []byte {
	return []byte("payload=" + url.QueryEscape(string(clickPayload(user, action, card, approvalID))))
}

// clickPayload is the block_actions payload of a click on an approval card.
func clickPayload(user, action string, card slacktest.Message, approvalID string) json.RawMessage {
	p := map[string]any{
		"type": "block_actions", "api_app_id": "A0AGENTGATE", "token": "9s8d9as89d8as9d8as989",
		"user":      map[string]any{"id": user, "username": strings.ToLower(user), "team_id": slacktest.DefaultTeamID},
		"team":      map[string]any{"id": slacktest.DefaultTeamID, "domain": "acme"},
		"channel":   map[string]any{"id": card.Channel, "name": "ops"},
		"container": map[string]any{"type": "message", "message_ts": card.TS, "channel_id": card.Channel, "thread_ts": card.ThreadTS},
		"message": map[string]any{"type": "message", "ts": card.TS, "thread_ts": card.ThreadTS, "user": slacktest.DefaultUserID,
			"bot_id": slacktest.DefaultBotID, "text": "Approval needed", "blocks": card.Blocks},
		"trigger_id":   fmt.Sprintf("1337.42.%s%d", strings.ToLower(user), time.Now().UnixNano()),
		"response_url": "http://127.0.0.1:1/actions/T0/1/x",
		"state":        map[string]any{"values": map[string]any{}},
		"actions": []map[string]any{{"action_id": action, "block_id": "approval_actions", "type": "button",
			"value": approvalID, "action_ts": "1700000200.000100", "text": map[string]any{"type": "plain_text", "text": action}}},
	}
	b, _ := json.Marshal(p)
	return b
}

// slashCommand is the form Slack posts for /agentgate <text>.
func slashCommand(user, text string) []byte {
	f := url.Values{"token": {"gIkuvaNzQIHg97ATvDxqgjtO"}, "team_id": {slacktest.DefaultTeamID}, "team_domain": {"acme"},
		"channel_id": {slackChannel}, "channel_name": {"ops"}, "user_id": {user}, "user_name": {"bob"},
		"command": {"/agentgate"}, "text": {text}, "api_app_id": {"A0AGENTGATE"},
		"response_url": {"http://127.0.0.1:1/commands/1234/5678"}, "trigger_id": {fmt.Sprintf("1334.7384.%d", time.Now().UnixNano())}}
	return []byte(f.Encode())
}

// cardIn returns the approval card posted in the thread, if any.
func cardIn(fake *slacktest.Server, thread string) (slacktest.Message, string, bool) {
	for _, m := range fake.Replies(slackChannel, thread) {
		var blocks []struct {
			Type     string `json:"type"`
			Elements []struct {
				ActionID string `json:"action_id"`
				Style    string `json:"style"`
				Value    string `json:"value"`
			} `json:"elements"`
			BlockID string `json:"block_id"`
		}
		_ = json.Unmarshal(m.Blocks, &blocks)
		for _, b := range blocks {
			if b.BlockID == "approval_summary" {
				id := ""
				for _, b2 := range blocks {
					for _, e := range b2.Elements {
						if e.ActionID == "approve" && e.Style == "primary" {
							id = e.Value
						}
					}
				}
				return m, id, true
			}
		}
	}
	return slacktest.Message{}, "", false
}

func TestSlackEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	fake := slacktest.New(t)
	tool := newToolServer(t)
	g := startSlackGateway(t, fake, tool.URL)

	// Requests Slack did not sign, or signed long ago, are refused.
	body := mentionEvent("app_mention", "Ev0FORGED", slackBob, "deploy web to staging", "1700000050.000100")
	for name, ts := range map[string]time.Time{"6 minutes old": time.Now().Add(-6 * time.Minute)} {
		if status, _ := g.slackPost(body, ts, nil); status != http.StatusUnauthorized {
			t.Errorf("%s request: status %d, want 401", name, status)
		}
	}
	forged := http.Header{"X-Slack-Signature": {slacktest.Signature("not-the-secret", body, time.Now())}}
	if status, _ := g.slackPost(body, time.Time{}, forged); status != http.StatusUnauthorized {
		t.Errorf("request signed with another secret: status %d, want 401", status)
	}
	req, _ := http.NewRequest(http.MethodPost, g.base+"/slack/events", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := httpClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unsigned request: %v %v, want 401", resp.Status, err)
	}

	// A mention; Slack's retry of it and the message event of the same post.
	const ts = "1700000100.000100"
	mention := mentionEvent("app_mention", "Ev0MENTION1", slackBob, "deploy web to staging", ts)
	for i, send := range []struct {
		body   []byte
		header http.Header
	}{
		{mention, nil},
		{mention, http.Header{"X-Slack-Retry-Num": {"1"}, "X-Slack-Retry-Reason": {"http_timeout"}}},
		{mentionEvent("message", "Ev0MESSAGE1", slackBob, "deploy web to staging", ts), nil},
	} {
		if status, b := g.slackPost(send.body, time.Time{}, send.header); status != http.StatusOK {
			t.Fatalf("delivery %d: status %d: %s", i, status, b)
		}
	}

	var card slacktest.Message
	var approvalID string
	eventually(t, "the approval card in the thread", func() (bool, string) {
		var ok bool
		card, approvalID, ok = cardIn(fake, ts)
		return ok && approvalID != "", fmt.Sprintf("%+v", fake.Replies(slackChannel, ts))
	})
	var sessions struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	g.json("GET", "/api/v1/sessions", nil, http.StatusOK, &sessions)
	nruns := 0
	for _, s := range sessions.Items {
		var runs struct {
			Items []runJSON `json:"items"`
		}
		g.json("GET", "/api/v1/sessions/"+url.PathEscape(s.ID)+"/runs", nil, http.StatusOK, &runs)
		nruns += len(runs.Items)
	}
	if nruns != 1 {
		t.Fatalf("%d runs for one post delivered three times, want 1", nruns)
	}

	// Bob may not approve: he is told so, alone, and nothing changes.
	if status, b := g.slackPost(buttonClick(slackBob, "approve", card, approvalID), time.Time{}, nil); status != http.StatusOK {
		t.Fatalf("click: status %d: %s", status, b)
	}
	eventually(t, "an ephemeral refusal for the non-approver", func() (bool, string) {
		for _, e := range fake.Ephemerals() {
			if e.User == slackBob && strings.Contains(e.Text, "may not decide") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", fake.Ephemerals())
	})
	var ap approvalJSON
	g.json("GET", "/api/v1/approvals/"+approvalID, nil, http.StatusOK, &ap)
	if ap.Status != "pending" || len(tool.Requests()) != 0 {
		t.Fatalf("after a refused click: approval %s, %d tool calls; want pending and none", ap.Status, len(tool.Requests()))
	}

	// The gateway dies after the card was posted; the click still works.
	g.kill()
	g.start()
	if status, b := g.slackPost(buttonClick(slackAna, "approve", card, approvalID), time.Time{}, nil); status != http.StatusOK {
		t.Fatalf("click after restart: status %d: %s", status, b)
	}
	eventually(t, "the answer in the thread", func() (bool, string) {
		for _, m := range fake.Replies(slackChannel, ts) {
			if strings.Contains(m.Text, "deploy tool returned") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", fake.Replies(slackChannel, ts))
	})
	eventually(t, "the card edited to the outcome", func() (bool, string) {
		m, id, _ := cardIn(fake, ts)
		return id == "" && strings.Contains(string(m.Blocks), "Approved by \\u003c@"+slackAna), string(m.Blocks)
	})
	if reqs := tool.Requests(); len(reqs) != 1 {
		t.Errorf("tool called %d times, want once: %v", len(reqs), reqs)
	}
	if n := len(fake.Replies(slackChannel, ts)); n != 2 {
		t.Errorf("the bot posted %d messages in the thread, want the card and the answer: %+v", n, fake.Replies(slackChannel, ts))
	}

	// The slash command runs a routine; its output comes into the channel.
	status, ack := g.slackPost(slashCommand(slackBob, "run daily-digest only prod"), time.Time{}, nil)
	var reply struct {
		ResponseType string `json:"response_type"`
		Text         string `json:"text"`
	}
	if err := json.Unmarshal(ack, &reply); status != http.StatusOK || err != nil || reply.ResponseType != "ephemeral" || !strings.Contains(reply.Text, "daily-digest") {
		t.Fatalf("slash command answer: %d %s (%v), want an ephemeral acknowledgement", status, ack, err)
	}
	eventually(t, "the routine's output in the channel", func() (bool, string) {
		for _, m := range fake.Messages(slackChannel) {
			if m.ThreadTS == "" && strings.Contains(m.Text, "Routine daily-digest") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", fake.Messages(slackChannel))
	})
	status, ack = g.slackPost(slashCommand(slackBob, "run no-such-routine"), time.Time{}, nil)
	if status != http.StatusOK || !strings.Contains(string(ack), "There is no routine") {
		t.Errorf("unknown routine: %d %s, want an ephemeral explanation", status, ack)
	}
}

// Socket Mode: no HTTP ingress; the same mention → card → click → answer.
func TestSlackSocketModeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	fake := slacktest.New(t)
	tool := newToolServer(t)
	g := startSlackGateway(t, fake, tool.URL, "SLACK_APP_TOKEN="+fake.AppToken)
	if !fake.SocketConnected(1, pollTimeout) {
		t.Fatal("the gateway did not open a Socket Mode connection")
	}
	const ts = "1700000300.000100"
	mention := json.RawMessage(mentionEvent("app_mention", "Ev0SOCKET1", slackBob, "deploy web to staging", ts))
	first := fake.SocketSend("events_api", mention)
	if _, ok := fake.SocketAck(first, pollTimeout); !ok {
		t.Fatal("the mention was not acknowledged")
	}
	if _, ok := fake.SocketAck(fake.SocketRetry(first), pollTimeout); !ok {
		t.Fatal("the redelivery was not acknowledged")
	}
	var card slacktest.Message
	var approvalID string
	eventually(t, "the approval card in the thread", func() (bool, string) {
		var ok bool
		card, approvalID, ok = cardIn(fake, ts)
		return ok && approvalID != "", fmt.Sprintf("%+v", fake.Replies(slackChannel, ts))
	})
	if _, ok := fake.SocketAck(fake.SocketSend("interactive", clickPayload(slackAna, "approve", card, approvalID)), pollTimeout); !ok {
		t.Fatal("the click was not acknowledged")
	}
	eventually(t, "the answer in the thread", func() (bool, string) {
		for _, m := range fake.Replies(slackChannel, ts) {
			if strings.Contains(m.Text, "deploy tool returned") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", fake.Replies(slackChannel, ts))
	})
	if n := len(tool.Requests()); n != 1 {
		t.Errorf("tool called %d times, want once", n)
	}
	cards := 0
	for _, m := range fake.Replies(slackChannel, ts) {
		if strings.Contains(string(m.Blocks), "approval_summary") {
			cards++
		}
	}
	if cards != 1 {
		t.Errorf("%d approval cards for one mention delivered twice, want 1", cards)
	}
	// With no signing secret, HTTP requests are refused even when signed.
	if status, _ := g.slackPost(mentionEvent("app_mention", "Ev0HTTP1", slackBob, "hello", "1700000400.000100"), time.Time{}, nil); status != http.StatusUnauthorized {
		t.Errorf("HTTP event without SLACK_SIGNING_SECRET: status %d, want 401", status)
	}
}
