package slack

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/agentgate/agentgate/interfaces/chat"
)

var testParser = Parser{BotUserID: "U0LAN0Z89", BotID: "B0AGENTGT"}

func readTestdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func jsonHeader() http.Header {
	return http.Header{"Content-Type": {"application/json"}}
}

func formHeader() http.Header {
	return http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
}

// interactionBody form-encodes an interactivity payload as Slack posts it.
func interactionBody(payload []byte) []byte {
	return []byte(url.Values{"payload": {string(payload)}}.Encode())
}

func TestParseEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file       string
		kind       Kind
		eventID    string
		dedupe     string
		msg        *chat.Inbound
		ignoredWhy string
		challenge  string
	}{
		{file: "url_verification.json", kind: KindURLVerification, challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"},
		{file: "app_mention.json", kind: KindMessage, eventID: "Ev123ABC456", dedupe: "msg:C123ABC456:1515449522.000016", msg: &chat.Inbound{
			Platform: "slack", Workspace: "T123ABC456", Channel: "C123ABC456", Thread: "1515449522.000016", MessageID: "1515449522.000016",
			UserID: "U123ABC456", Text: "what is the status of the deploy?", Mentioned: true, At: time.Unix(1515449522, 16000).UTC(),
		}},
		{file: "message_file_share.json", kind: KindMessage, eventID: "Ev0PV52K27", dedupe: "msg:D024BE91L:1355517540.000007", msg: &chat.Inbound{
			Platform: "slack", Workspace: "T123ABC456", Channel: "D024BE91L", MessageID: "1355517540.000007",
			UserID: "U123ABC456", Text: "what does this graph say?", DirectMessage: true, At: time.Unix(1355517540, 7000).UTC(),
			Files: []chat.InFile{{Ref: "https://files.slack.com/files-pri/T123ABC456-F07ABCD1234/download/latency.png",
				Name: "latency.png", MIME: "image/png", Size: 48213}},
		}},
		{file: "message_mention.json", kind: KindMessage, eventID: "Ev123ABC457", dedupe: "msg:C123ABC456:1515449522.000016", msg: &chat.Inbound{
			Platform: "slack", Workspace: "T123ABC456", Channel: "C123ABC456", Thread: "1515449522.000016", MessageID: "1515449522.000016",
			UserID: "U123ABC456", Text: "what is the status of the deploy?", Mentioned: true, At: time.Unix(1515449522, 16000).UTC(),
		}},
		{file: "message_thread.json", kind: KindMessage, eventID: "Ev0PV52K25", dedupe: "msg:C123ABC456:1515449600.000200", msg: &chat.Inbound{
			Platform: "slack", Workspace: "T123ABC456", Channel: "C123ABC456", Thread: "1515449522.000016", MessageID: "1515449600.000200",
			UserID: "U222BBB222", Text: "and roll back if it fails &amp; tell me", At: time.Unix(1515449600, 200000).UTC(),
		}},
		{file: "message_im.json", kind: KindMessage, eventID: "Ev0PV52K26", dedupe: "msg:D024BE91L:1355517523.000005", msg: &chat.Inbound{
			Platform: "slack", Workspace: "T123ABC456", Channel: "D024BE91L", Thread: "", MessageID: "1355517523.000005",
			UserID: "U123ABC456", Text: "hello there", DirectMessage: true, At: time.Unix(1355517523, 5000).UTC(),
		}},
		{file: "message_bot.json", kind: KindMessage, eventID: "Ev0PV52K27", dedupe: "msg:C123ABC456:1358877455.000010", msg: &chat.Inbound{
			Platform: "slack", Workspace: "T123ABC456", Channel: "C123ABC456", Thread: "1358877455.000010", MessageID: "1358877455.000010",
			UserName: "github", Text: "Pushing is the answer", FromBot: true, At: time.Unix(1358877455, 10000).UTC(),
		}},
		{file: "message_own.json", kind: KindIgnored, eventID: "Ev0PV52K28", ignoredWhy: "own message"},
		{file: "message_changed.json", kind: KindIgnored, eventID: "Ev0PV52K29", ignoredWhy: "message subtype message_changed"},
		{file: "app_rate_limited.json", kind: KindIgnored, ignoredWhy: "app_rate_limited"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			req, err := testParser.Parse(jsonHeader(), readTestdata(t, tt.file))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if req.Kind != tt.kind || req.EventID != tt.eventID || req.DedupeKey != tt.dedupe || req.Challenge != tt.challenge || req.Ignored != tt.ignoredWhy {
				t.Fatalf("Parse = {Kind:%v EventID:%q DedupeKey:%q Challenge:%q Ignored:%q}, want {%v %q %q %q %q}",
					req.Kind, req.EventID, req.DedupeKey, req.Challenge, req.Ignored, tt.kind, tt.eventID, tt.dedupe, tt.challenge, tt.ignoredWhy)
			}
			switch {
			case tt.msg == nil && req.Message != nil:
				t.Fatalf("Message = %+v, want none", *req.Message)
			case tt.msg != nil && (req.Message == nil || !reflect.DeepEqual(*req.Message, *tt.msg)):
				t.Fatalf("Message = %+v\nwant      %+v", req.Message, *tt.msg)
			}
		})
	}
}

// The app_mention and the message event for one post, and a retry of either,
// dedupe to one inbox key and one session.
func TestParseMentionAndMessageDedupe(t *testing.T) {
	t.Parallel()
	a, err := testParser.ParseEvent(readTestdata(t, "app_mention.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := testParser.ParseEvent(readTestdata(t, "message_mention.json"))
	if err != nil {
		t.Fatal(err)
	}
	if a.DedupeKey != m.DedupeKey {
		t.Errorf("dedupe keys differ: %q vs %q", a.DedupeKey, m.DedupeKey)
	}
	if chat.SessionKey("ops", *a.Message) != chat.SessionKey("ops", *m.Message) {
		t.Error("session keys differ")
	}
	reply, err := testParser.ParseEvent(readTestdata(t, "message_thread.json"))
	if err != nil {
		t.Fatal(err)
	}
	if chat.SessionKey("ops", *reply.Message) != chat.SessionKey("ops", *a.Message) {
		t.Error("thread reply keyed to another session than the mention that opened it")
	}
}

func TestParseInteraction(t *testing.T) {
	t.Parallel()
	req, err := testParser.Parse(formHeader(), interactionBody(readTestdata(t, "block_actions.json")))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := chat.Action{
		Platform: "slack", Workspace: "T123ABC456", Channel: "C123ABC456", MessageRef: "1515449650.000100", Thread: "1515449522.000016",
		UserID: "U222BBB222", ActionID: "approve", ApprovalID: "apr_0123456789abcdef",
		ResponseURL: "https://hooks.slack.com/actions/T123ABC456/1234567890/abcdefABCDEF",
		TriggerID:   "12466734323.1395872398.8e08c6ea8bf9fc4e7a0e7a4b0b5dcd0a",
		At:          time.Unix(1515449660, 123456000).UTC(),
	}
	if req.Kind != KindAction || req.Action == nil {
		t.Fatalf("Parse = %+v, want an action", req)
	}
	got := *req.Action
	if got.Platform != want.Platform || got.Workspace != want.Workspace || got.Channel != want.Channel || got.MessageRef != want.MessageRef ||
		got.Thread != want.Thread || got.UserID != want.UserID || got.ActionID != want.ActionID || got.ApprovalID != want.ApprovalID ||
		got.ResponseURL != want.ResponseURL || got.TriggerID != want.TriggerID || !got.At.Equal(want.At) || len(got.Groups) != 0 {
		t.Fatalf("Action = %+v\nwant     %+v", got, want)
	}
	if req.DedupeKey != "action:approve:"+want.TriggerID {
		t.Errorf("DedupeKey = %q", req.DedupeKey)
	}

	// The same payload through Socket Mode (raw JSON) parses the same way.
	sm, err := testParser.ParseInteraction(readTestdata(t, "block_actions.json"))
	if err != nil || sm.DedupeKey != req.DedupeKey {
		t.Fatalf("ParseInteraction = %+v, %v", sm, err)
	}
}

func TestParseInteractionRejectsForeignValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload string
		kind    Kind
		err     error
	}{
		{"value is not an approval id", `{"type":"block_actions","user":{"id":"U1"},"trigger_id":"t1","actions":[{"type":"button","block_id":"decision","action_id":"approve","value":"../../etc"}]}`, 0, ErrMalformed},
		{"no user", `{"type":"block_actions","trigger_id":"t1","actions":[{"type":"button","block_id":"decision","action_id":"deny","value":"apr_0123456789abcdef"}]}`, 0, ErrMalformed},
		{"someone else's button", `{"type":"block_actions","user":{"id":"U1"},"trigger_id":"t1","actions":[{"type":"button","block_id":"decision","action_id":"vote","value":"x"}]}`, KindIgnored, nil},
		{"view submission", `{"type":"view_submission","user":{"id":"U1"},"trigger_id":"t1"}`, KindIgnored, nil},
		{"not json", `{"type":`, 0, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, err := testParser.ParseInteraction([]byte(tt.payload))
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil || req.Kind != tt.kind {
				t.Fatalf("ParseInteraction = %v, %v; want kind %v", req.Kind, err, tt.kind)
			}
		})
	}
}

func TestParseCommand(t *testing.T) {
	t.Parallel()
	req, err := testParser.Parse(formHeader(), readTestdata(t, "slash_command.txt"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := chat.Command{
		Platform: "slack", Workspace: "T123ABC456", Channel: "C123ABC456", UserID: "U123ABC456", UserName: "steve",
		Name: "agentgate", Text: "run daily-digest for team A", ResponseURL: "https://hooks.slack.com/commands/1234/5678",
		TriggerID: "13345224609.738474920.8088930838d88f008e0",
	}
	if req.Kind != KindCommand || req.Command == nil || *req.Command != want {
		t.Fatalf("Parse = %+v %+v\nwant %+v", req, req.Command, want)
	}
	if req.DedupeKey != "command:"+want.TriggerID {
		t.Errorf("DedupeKey = %q", req.DedupeKey)
	}

	sm, err := testParser.ParseCommandJSON(readTestdata(t, "slash_command_socket.json"))
	if err != nil {
		t.Fatalf("ParseCommandJSON: %v", err)
	}
	if sm.Command.Name != "agentgate" || sm.Command.Text != "routines" || sm.Command.UserID != "U123ABC456" {
		t.Fatalf("ParseCommandJSON = %+v", *sm.Command)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		h    http.Header
		body string
		kind Kind
		err  error
	}{
		{"empty json", jsonHeader(), ``, 0, ErrMalformed},
		{"json array", jsonHeader(), `[]`, 0, ErrMalformed},
		{"no type", jsonHeader(), `{}`, 0, ErrMalformed},
		{"callback without event", jsonHeader(), `{"type":"event_callback","event_id":"Ev1"}`, 0, ErrMalformed},
		{"message without ts", jsonHeader(), `{"type":"event_callback","event_id":"Ev1","event":{"type":"message","channel":"C1"}}`, 0, ErrMalformed},
		{"other event", jsonHeader(), `{"type":"event_callback","event_id":"Ev1","event":{"type":"reaction_added"}}`, KindIgnored, nil},
		{"empty form", formHeader(), ``, 0, ErrMalformed},
		{"ssl check", formHeader(), `ssl_check=1&token=x`, KindIgnored, nil},
		{"xml", http.Header{"Content-Type": {"text/xml"}}, `<a/>`, 0, ErrMalformed},
		{"no content type json", http.Header{}, string(readTestdata(t, "url_verification.json")), KindURLVerification, nil},
		{"command without trigger", formHeader(), `command=%2Fagentgate&user_id=U1`, 0, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, err := testParser.Parse(tt.h, []byte(tt.body))
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil || req.Kind != tt.kind {
				t.Fatalf("Parse = %v, %v; want kind %v", req.Kind, err, tt.kind)
			}
		})
	}
}

func TestStripMention(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want  string
		mentioned bool
	}{
		{"<@U0LAN0Z89> hi", "hi", true},
		{"hi <@U0LAN0Z89|agentgate>, deploy", "hi , deploy", true},
		{"<@U0LAN0Z890> not me", "<@U0LAN0Z890> not me", false},
		{"ask <@U999> about it", "ask <@U999> about it", false},
		{"<@U0LAN0Z89", "<@U0LAN0Z89", false},
		{"  spaced\n\nout  ", "spaced out", false},
	}
	for _, tt := range tests {
		got, m := testParser.stripMention(tt.in)
		if got != tt.want || m != tt.mentioned {
			t.Errorf("stripMention(%q) = %q, %v; want %q, %v", tt.in, got, m, tt.want, tt.mentioned)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"url_verification.json", "app_mention.json", "message_mention.json", "message_thread.json",
		"message_im.json", "message_bot.json", "message_own.json", "message_changed.json", "app_rate_limited.json"} {
		f.Add("application/json", readTestdata(f, name))
	}
	f.Add("application/x-www-form-urlencoded", interactionBody(readTestdata(f, "block_actions.json")))
	f.Add("application/x-www-form-urlencoded", readTestdata(f, "slash_command.txt"))
	f.Add("", []byte("ssl_check=1"))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		req, err := testParser.Parse(http.Header{"Content-Type": {contentType}}, body)
		checkParsed(t, req, err)
	})
}

func FuzzParseEvent(f *testing.F) {
	for _, name := range []string{"url_verification.json", "app_mention.json", "message_mention.json", "message_thread.json",
		"message_im.json", "message_bot.json", "message_own.json", "message_changed.json", "app_rate_limited.json"} {
		f.Add(readTestdata(f, name))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := testParser.ParseEvent(body)
		checkParsed(t, req, err)
	})
}

func FuzzParseInteraction(f *testing.F) {
	f.Add(readTestdata(f, "block_actions.json"))
	f.Add([]byte(`{"type":"block_actions","user":{"id":"U1"},"trigger_id":"t","actions":[{"block_id":"decision","action_id":"deny","value":"apr_0123456789abcdef"}]}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		req, err := testParser.ParseInteraction(payload)
		checkParsed(t, req, err)
	})
}

// ParseCommandForm parses a slash command's form-encoded HTTP body.
func (p Parser) ParseCommandForm(body []byte) (Request, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return Request{}, malformed("form body: %v", err)
	}
	return commandRequest(commandFromForm(form))
}

func FuzzParseCommand(f *testing.F) {
	f.Add(false, readTestdata(f, "slash_command.txt"))
	f.Add(true, readTestdata(f, "slash_command_socket.json"))
	f.Fuzz(func(t *testing.T, socket bool, body []byte) {
		var req Request
		var err error
		if socket {
			req, err = testParser.ParseCommandJSON(body)
		} else {
			req, err = testParser.ParseCommandForm(body)
		}
		checkParsed(t, req, err)
	})
}

// checkParsed asserts the invariants every parse result keeps.
func checkParsed(t *testing.T, req Request, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
		return
	}
	switch req.Kind {
	case KindURLVerification:
		if req.Challenge == "" {
			t.Fatal("url_verification without challenge")
		}
	case KindMessage:
		if req.Message == nil || req.DedupeKey == "" || req.Message.Channel == "" || req.Message.MessageID == "" {
			t.Fatalf("message without channel/id/dedupe key: %+v", req)
		}
	case KindAction:
		if req.Action == nil || req.DedupeKey == "" || req.Action.UserID == "" || req.Action.ApprovalID == "" ||
			(req.Action.ActionID != chat.ActionApprove && req.Action.ActionID != chat.ActionDeny) {
			t.Fatalf("bad action: %+v", req)
		}
	case KindCommand:
		if req.Command == nil || req.DedupeKey == "" || req.Command.Name == "" || req.Command.UserID == "" {
			t.Fatalf("bad command: %+v", req)
		}
	case KindIgnored:
		if req.Ignored == "" {
			t.Fatal("ignored without a reason")
		}
	default:
		t.Fatalf("unknown kind %v", req.Kind)
	}
}
