package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core/model/fakeopenai"
	"github.com/agentgate/agentgate/interfaces/slack/slacktest"
	"github.com/agentgate/agentgate/interfaces/telegram/telegramtest"
)

// Files both ways, checked from outside against the binary: a Slack file
// share and a Telegram photo reach the model as images, and the image a
// tool returns is uploaded to the conversation.

// pngBytes is a tiny PNG (a 1×1 pixel).
var pngBytes, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

// chartServer is an HTTP tool answering every call with a PNG chart.
func chartServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Content-Disposition", `inline; filename="latency.png"`)
		_, _ = w.Write(pngBytes)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// imageModel is a fake model that, shown an image, calls the chart tool and
// then answers; it records the images it was shown.
type imageModel struct {
	mu     sync.Mutex
	images []string // data URLs seen in user messages
}

func (m *imageModel) reply(req fakeopenai.Request) fakeopenai.Reply {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, msg := range req.Messages {
		if msg.Role == "tool" {
			return fakeopenai.Reply{Text: "Here is the chart: " + msg.Content}
		}
	}
	last := req.Messages[len(req.Messages)-1]
	m.images = append(m.images, last.Images...)
	if len(last.Images) == 0 {
		return fakeopenai.Reply{Text: "I see no image; " + last.Content}
	}
	return fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{Name: "chart", Arguments: `{}`}}}
}

func (m *imageModel) seen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.images...)
}

func filesConfig(t *testing.T, chartURL string) string {
	t.Helper()
	return writeFile(t, "agentgate.yaml", fmt.Sprintf(`
agents:
  ops:
    model: {provider: openai, name: gpt-4o-mini, base_url: "${OPENAI_BASE_URL}"}
    tools: [chart]
tools:
  chart:
    description: Draws the latency chart.
    http: {url: %q, method: POST, timeout: 10s}
interfaces:
  slack:
    default_agent: ops
  telegram:
    default_agent: ops
`, chartURL))
}

func TestE2EFilesBothWays(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	model := &imageModel{}
	_, modelURL := startModel(t, model.reply)
	slackFake := slacktest.New(t)
	tg := telegramtest.New(tgToken)
	t.Cleanup(tg.Close)
	g := startGateway(t, gatewayOptions{config: filesConfig(t, chartServer(t)), env: []string{
		"OPENAI_BASE_URL=" + modelURL, "OPENAI_API_KEY=sk-test",
		"SLACK_SIGNING_SECRET=" + slackSecret, "SLACK_BOT_TOKEN=" + slackFake.Token, "SLACK_API_URL=" + slackFake.URL,
		"TELEGRAM_BOT_TOKEN=" + tgToken, "TELEGRAM_API_URL=" + tg.URL, "TELEGRAM_WEBHOOK_SECRET=" + tgSecret,
	}})
	wantURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngBytes)

	// Slack: a file shared with a mention, in a channel.
	file := slackFake.AddFile("screenshot.png", "image/png", pngBytes)
	ev := map[string]any{}
	_ = json.Unmarshal(mentionEvent("message", "Ev0FILES001", slackBob, "what is wrong here?", "1700000100.000100"), &ev)
	inner := ev["event"].(map[string]any)
	inner["subtype"], inner["files"] = "file_share", []any{file}
	body, _ := json.Marshal(ev)
	if status, out := g.slackPost(body, time.Time{}, nil); status != http.StatusOK {
		t.Fatalf("file share: %d %s", status, out)
	}
	eventually(t, "the chart uploaded to the Slack thread", func() (bool, string) {
		ups := slackFake.Uploads()
		return len(ups) == 1, fmt.Sprintf("uploads %+v, messages %+v", ups, slackFake.Replies(slackChannel, "1700000100.000100"))
	})
	if up := slackFake.Uploads()[0]; up.Channel != slackChannel || up.ThreadTS != "1700000100.000100" || up.Name != "latency.png" || !bytes.Equal(up.Data, pngBytes) {
		t.Errorf("upload = %s in %s/%s, %d bytes; want latency.png in the thread", up.Name, up.Channel, up.ThreadTS, len(up.Data))
	}
	eventually(t, "the answer in the thread", func() (bool, string) {
		for _, m := range slackFake.Replies(slackChannel, "1700000100.000100") {
			if strings.Contains(m.Text, "Here is the chart") && strings.Contains(m.Text, "latency.png") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", slackFake.Replies(slackChannel, "1700000100.000100"))
	})

	// Telegram: a photo with a caption that mentions the bot.
	photo := tg.AddFile(pngBytes)
	upd, _ := json.Marshal(map[string]any{"update_id": 910001, "message": map[string]any{
		"message_id": 411, "date": 1764686400, "caption": "@agentgate_bot what is wrong here?",
		"caption_entities": []map[string]any{{"offset": 0, "length": 14, "type": "mention"}},
		"photo": []map[string]any{
			{"file_id": photo + "-small", "file_unique_id": "AQADsmall", "width": 90, "height": 60, "file_size": 900},
			{"file_id": photo, "file_unique_id": "AQADbig", "width": 1, "height": 1, "file_size": len(pngBytes)},
		},
		"from": map[string]any{"id": tgBob, "is_bot": false, "first_name": "Bob", "username": "bob_dev"},
		"chat": map[string]any{"id": tgGroup, "title": "Ops", "type": "supergroup"},
	}})
	if status := g.telegramPost(tgSecret, upd); status != http.StatusOK {
		t.Fatalf("photo: %d", status)
	}
	eventually(t, "the chart sent to the Telegram group", func() (bool, string) {
		for _, m := range tg.Messages() {
			if m.ChatID == tgGroup && m.Kind == "photo" && bytes.Equal(m.File, pngBytes) {
				return true, ""
			}
		}
		return false, tgMessages(tg)
	})

	seen := model.seen()
	if len(seen) != 2 || seen[0] != wantURL || seen[1] != wantURL {
		t.Errorf("the model saw %d images, want the Slack file and the Telegram photo as PNG data URLs", len(seen))
	}
}
