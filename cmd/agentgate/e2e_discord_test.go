package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/interfaces/discord/discordtest"
)

// The Discord side of the gateway, checked from outside: a real `agentgate
// serve` against the fake Discord (REST API at DISCORD_API_URL, a Gateway
// websocket), fed Gateway dispatches and signed interactions shaped like
// Discord's.

const (
	discordChannel = "1100000000000000077"
	discordAna     = "500000000000000001" // the tool's approver
	discordBob     = "500000000000000002" // asks, may not approve
)

func discordConfig(t *testing.T, toolURL string) string {
	t.Helper()
	return chatConfig(t, toolURL, discordAna, "discord")
}

// chatConfig is the config of the chat end-to-end tests: agent ops with a
// deploy tool that approver must approve, a disabled routine daily-digest,
// and the chat interface iface answering with ops.
func chatConfig(t *testing.T, toolURL, approver, iface string) string {
	t.Helper()
	return writeFile(t, "agentgate.yaml", fmt.Sprintf(`
agents:
  ops:
    description: On-call assistant
    instructions: You help the platform team.
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
    approval: {required: true, timeout: 15m, approvers: ["%s"]}
routines:
  daily-digest:
    agent: ops
    schedule: "0 9 * * 1-5"
    input: Summarize yesterday's deploys.
    deliver_to: none
    enabled: false
    callers: ["channel:slack:`+slackChannel+`", "channel:discord:`+discordChannel+`"]
interfaces:
  %s:
    default_agent: ops
`, toolURL, approver, iface))
}

// discordCard returns the approval card among msgs and its approval id
// (empty once the buttons are gone).
func discordCard(msgs []discordtest.Message) (discordtest.Message, string, bool) {
	for _, m := range msgs {
		if !strings.Contains(m.Content, "wants to run `deploy`") && !strings.Contains(m.Content, "wanted to run `deploy`") {
			continue
		}
		for _, row := range m.Components {
			for _, c := range row.(map[string]any)["components"].([]any) {
				if id, ok := strings.CutPrefix(fmt.Sprint(c.(map[string]any)["custom_id"]), "agentgate:approve:"); ok {
					return m, id, true
				}
			}
		}
		return m, "", true
	}
	return discordtest.Message{}, "", false
}

func TestDiscordEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	fake := discordtest.NewServer()
	t.Cleanup(fake.Close)
	key := discordtest.NewKey()
	tool := newToolServer(t)
	g := startGateway(t, gatewayOptions{config: discordConfig(t, tool.URL), env: []string{
		"DISCORD_BOT_TOKEN=" + discordtest.Token, "DISCORD_PUBLIC_KEY=" + key.PublicHex(),
		"DISCORD_APPLICATION_ID=" + discordtest.AppID, "DISCORD_API_URL=" + fake.APIURL(),
	}})
	if len(fake.Commands()) != 1 {
		t.Errorf("registered commands = %v, want /agentgate", fake.Commands())
	}
	if fake.Identified(pollTimeout) == nil {
		t.Fatal("the gateway did not connect to the Gateway")
	}
	url := g.base + "/discord/interactions"

	// Interactions: PING is answered; unsigned or wrongly signed → 401.
	ping := map[string]any{"id": fake.ID(), "application_id": discordtest.AppID, "type": 1, "token": "t", "version": 1}
	if resp, body, err := key.Post(url, ping); err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"type":1`) {
		t.Fatalf("PING: %v %s %v", resp, body, err)
	}
	for name, k := range map[string]discordtest.Key{"unsigned": {}, "wrongly signed": discordtest.NewKey()} {
		if resp, _, err := k.Post(url, ping); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s interaction: %v %v, want 401", name, resp.Status, err)
		}
	}

	// A mention in a channel, delivered twice: one thread, one run, one card.
	m := fake.MessageCreate(discordChannel, discordtest.GuildID, discordBob, "deploy web to staging", true)
	fake.Dispatch("MESSAGE_CREATE", m)
	fake.Dispatch("MESSAGE_CREATE", m)
	thread := m["id"].(string)
	var approvalID string
	var card discordtest.Message
	eventually(t, "the approval card in the thread", func() (bool, string) {
		var ok bool
		card, approvalID, ok = discordCard(fake.Messages(thread))
		return ok && approvalID != "", fmt.Sprintf("%+v", fake.Messages(thread))
	})
	if fake.Threads()[thread] != discordChannel {
		t.Errorf("threads = %v, want one on the mention", fake.Threads())
	}

	// Bob may not approve: he alone is told so, and nothing changes.
	click := func(user string) map[string]any {
		in := fake.Interaction(3, thread, user, nil, discordtest.Button("agentgate:approve:"+approvalID))
		in["message"] = map[string]any{"id": card.ID, "channel_id": thread, "content": card.Content, "type": 0} // the card clicked
		resp, body, err := key.Post(url, in)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("click: %v %s %v", resp, body, err)
		}
		var out map[string]any
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("click answer %s: %v", body, err)
		}
		return out
	}
	if got := click(discordBob); got["type"] != float64(4) || !strings.Contains(fmt.Sprint(got["data"]), "may not decide") {
		t.Errorf("refused click answered %v", got)
	}
	var ap approvalJSON
	g.json("GET", "/api/v1/approvals/"+approvalID, nil, http.StatusOK, &ap)
	if ap.Status != "pending" || len(tool.Requests()) != 0 {
		t.Fatalf("after a refused click: approval %s, %d tool calls", ap.Status, len(tool.Requests()))
	}

	// The gateway dies after the card was posted; the click still works.
	g.kill()
	g.start()
	if fake.Identified(pollTimeout) == nil {
		t.Fatal("the restarted gateway did not connect to the Gateway")
	}
	if got := click(discordAna); got["type"] != float64(7) {
		t.Errorf("approving click answered %v, want the card updated", got)
	}
	eventually(t, "the answer in the thread", func() (bool, string) {
		for _, m := range fake.Messages(thread) {
			if strings.Contains(m.Content, "deploy tool returned") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", fake.Messages(thread))
	})
	eventually(t, "the card edited to the outcome", func() (bool, string) {
		c, id, _ := discordCard(fake.Messages(thread))
		return id == "" && strings.Contains(c.Content, "Approved by <@"+discordAna+">"), c.Content
	})
	if n := len(tool.Requests()); n != 1 {
		t.Errorf("tool called %d times, want once", n)
	}
	if n := len(fake.Messages(thread)); n != 2 {
		t.Errorf("the bot posted %d messages in the thread, want the card and the answer: %+v", n, fake.Messages(thread))
	}

	// A follow-up in the thread, without a mention, continues the session.
	fake.Dispatch("MESSAGE_CREATE", fake.MessageCreate(thread, discordtest.GuildID, discordBob, "thanks, and how are you?", false))
	eventually(t, "the follow-up's answer in the thread", func() (bool, string) {
		return len(fake.Messages(thread)) == 3, fmt.Sprintf("%+v", fake.Messages(thread))
	})

	// /agentgate run: deferred at once, a follow-up, and the routine's output in the channel.
	resp, body, err := key.Post(url, fake.Interaction(2, discordChannel, discordBob, nil,
		discordtest.Command("run", map[string]string{"routine": "daily-digest", "input": "only prod"})))
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"type":5`) {
		t.Fatalf("command: %v %s %v, want a deferred response", resp, body, err)
	}
	eventually(t, "the command's follow-up", func() (bool, string) {
		f := fake.Followups()
		return len(f) == 1 && strings.Contains(fmt.Sprint(f[0].Body["content"]), "Started routine `daily-digest`"), fmt.Sprintf("%+v", f)
	})
	eventually(t, "the routine's output in the channel", func() (bool, string) {
		for _, m := range fake.Messages(discordChannel) {
			if strings.Contains(m.Content, "daily-digest") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", fake.Messages(discordChannel))
	})
}
