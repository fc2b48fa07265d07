package telegram_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/telegram"
)

// FuzzCallbackData feeds callback queries (a click on an inline keyboard
// button, testdata/callback_query.json with the fuzzed callback_data, user,
// chat and message) to the parser: only "a:" and "d:" data is a click on an
// approval button, and the click names the approval, the user and the
// message exactly as the update does.
func FuzzCallbackData(f *testing.F) {
	raw, err := os.ReadFile(filepath.Join("testdata", "callback_query.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, data := range []string{"a:apr_0123456789abcdef", "d:apr_0123456789abcdef", "a:", "d:", "a", "x:apr_1", "",
		"A:apr_1", "a:apr_1:extra", "d:\x00\xff", "a:" + strings.Repeat("x", 62), "approve:apr_1"} {
		f.Add(data, int64(5550001), int64(-1001234567890), 101, int64(1764686406), false)
	}
	f.Add("a:apr_1", int64(0), int64(-100), 1, int64(1764686406), true) // no user: the click decides nothing
	f.Add("d:apr_1", int64(5550001), int64(42), 0, int64(0), false)     // an inaccessible message (date 0)
	p := telegram.Parser{BotID: 7000000001, BotUsername: "agentgate_bot"}
	f.Fuzz(func(t *testing.T, data string, from, chatID int64, msgID int, date int64, topic bool) {
		var sample map[string]any
		if err := json.Unmarshal(raw, &sample); err != nil {
			t.Fatal(err)
		}
		q := sample["callback_query"].(map[string]any)
		q["data"] = data
		q["from"].(map[string]any)["id"] = from
		m := q["message"].(map[string]any)
		m["message_id"], m["date"], m["is_topic_message"], m["message_thread_id"] = msgID, date, topic, 7
		m["chat"].(map[string]any)["id"] = chatID
		body, err := json.Marshal(sample)
		if err != nil {
			t.Fatal(err)
		}
		var u models.Update
		if err := json.Unmarshal(body, &u); err != nil {
			return // not an update Telegram would send (the date overflows an int, say)
		}
		req := p.Parse(u)
		if req.Key != "upd:815000007" {
			t.Errorf("Key = %q, want upd:815000007", req.Key)
		}
		cq := u.CallbackQuery
		action, id, ok := "", "", false
		if rest, found := strings.CutPrefix(cq.Data, "a:"); found {
			action, id, ok = chat.ActionApprove, rest, true
		} else if rest, found := strings.CutPrefix(cq.Data, "d:"); found {
			action, id, ok = chat.ActionDeny, rest, true
		}
		if !ok {
			if req.Kind != telegram.KindIgnored || req.Action != nil {
				t.Fatalf("callback_data %q parsed as %+v, want it ignored", cq.Data, req)
			}
			return
		}
		a := req.Action
		if req.Kind != telegram.KindCallback || a == nil || req.CallbackID != cq.ID {
			t.Fatalf("callback_data %q parsed as %+v, want a click answering %s", cq.Data, req, cq.ID)
		}
		if a.Platform != chat.PlatformTelegram || a.ActionID != action || a.ApprovalID != id {
			t.Errorf("callback_data %q: action %q on %q, want %q on %q", cq.Data, a.ActionID, a.ApprovalID, action, id)
		}
		wantUser := strconv.FormatInt(cq.From.ID, 10)
		if cq.From.ID == 0 {
			wantUser = ""
		}
		if a.UserID != wantUser {
			t.Errorf("user %d: UserID = %q, want %q", cq.From.ID, a.UserID, wantUser)
		}
		if msg := cq.Message.Message; msg != nil {
			if a.Channel != strconv.FormatInt(msg.Chat.ID, 10) || a.MessageRef != strconv.Itoa(msg.ID) {
				t.Errorf("click on message %d of chat %d: channel %q, message %q", msg.ID, msg.Chat.ID, a.Channel, a.MessageRef)
			}
		} else if a.Channel != "" || a.MessageRef != "" {
			t.Errorf("click on an inaccessible message names channel %q, message %q", a.Channel, a.MessageRef)
		}
	})
}
