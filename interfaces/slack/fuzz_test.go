package slack

import (
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// FuzzVerify feeds Slack's signature headers and bodies to Verify: it
// accepts a request only when X-Slack-Signature is the HMAC of the
// timestamp and body and the timestamp is within MaxRequestAge, accepts
// every such request, and otherwise returns an error wrapping
// ErrUnverified and one reason.
func FuzzVerify(f *testing.F) {
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	now := time.Unix(1531420618, 0)
	slashBody := []byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
	// Slack's documented example, and variations of it.
	f.Add("v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503", "1531420618", slashBody, false)
	f.Add("", "1531420618", slashBody, true)
	f.Add("", "1531420918", slashBody, true) // at the edge of the window
	f.Add("", "1531421000", slashBody, true) // beyond it
	f.Add("", "+1531420618", []byte(`{"type":"url_verification","challenge":"x"}`), true)
	f.Add("V0=A2114D57B48EAC39B9AD189DD8316235A7B4A8D21A10BD27519666489C69B503", "1531420618", slashBody, false)
	f.Add("v1=a2114d57", "1531420618", slashBody, false)
	f.Add("v0=zz", "yesterday", []byte{}, false)
	f.Add("v0=", "", []byte(nil), false)
	f.Add("v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503", "-9223372036854775808", slashBody, false)
	f.Add("v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503", "9223372036854775807", slashBody, false)
	f.Fuzz(func(t *testing.T, sig, ts string, body []byte, signIt bool) {
		want := sign(secret, ts, body)
		if signIt {
			sig = "v0=" + hex.EncodeToString(want)
		}
		h := http.Header{}
		h.Set(HeaderSignature, sig)
		h.Set(HeaderTimestamp, ts)
		err := Verify(secret, h, body, now)

		secs, perr := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
		fresh := perr == nil && now.Sub(time.Unix(secs, 0)).Abs() <= MaxRequestAge
		got, herr := hex.DecodeString(strings.TrimPrefix(h.Get(HeaderSignature), "v0="))
		signed := strings.HasPrefix(h.Get(HeaderSignature), "v0=") && herr == nil && hmac.Equal(got, sign(secret, h.Get(HeaderTimestamp), body))
		if err == nil {
			if !fresh || !signed {
				t.Fatalf("Verify accepted signature %q at %q (fresh %v, signed %v)", sig, ts, fresh, signed)
			}
			return
		}
		if signIt && fresh && h.Get(HeaderTimestamp) != "" {
			t.Fatalf("Verify refused a request signed at %q within the window: %v", ts, err)
		}
		if !errors.Is(err, ErrUnverified) {
			t.Fatalf("Verify error %v does not wrap ErrUnverified", err)
		}
		reasons := 0
		for _, r := range []error{ErrMissingSignature, ErrStaleTimestamp, ErrBadSignature, ErrNoSigningSecret} {
			if errors.Is(err, r) {
				reasons++
			}
		}
		if reasons != 1 {
			t.Fatalf("Verify error %v matches %d reasons, want 1", err, reasons)
		}
	})
}

// FuzzSocketEnvelope feeds Socket Mode frames to what the Socket does with
// one: slack-go decodes the frame and its payload (its own parse must not
// crash the connection's goroutine either), then the Socket parses the
// envelope with the parser of its type, whatever slack-go made of it. The
// result keeps the invariants of every parse (checkParsed).
func FuzzSocketEnvelope(f *testing.F) {
	frame := func(typ string, payload []byte) []byte {
		b, err := json.Marshal(map[string]any{"envelope_id": "1d4d7b05-6c6d-4fcd-8f10-d9e8c0e5a9b1", "type": typ,
			"payload": json.RawMessage(payload), "accepts_response_payload": typ != "events_api", "retry_attempt": 0, "retry_reason": ""})
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	for _, name := range []string{"app_mention.json", "message_mention.json", "message_thread.json", "message_im.json",
		"message_bot.json", "message_own.json", "message_changed.json", "app_rate_limited.json", "url_verification.json"} {
		f.Add(frame("events_api", readTestdata(f, name)))
	}
	f.Add(frame("interactive", readTestdata(f, "block_actions.json")))
	f.Add(frame("slash_commands", readTestdata(f, "slash_command_socket.json")))
	f.Add(frame("events_api", []byte(`{"type":"event_callback","team_id":"T1","event_id":"Ev9","event":{"type":"a_future_event","event_ts":"1700000008.000100"}}`)))
	f.Add(frame("events_api", []byte(`{"type":"event_callback","team_id":"T1"}`)))
	f.Add(frame("interactive", []byte(`{"type":"view_submission","view":{"callback_id":"deny","private_metadata":"apr_1","state":{"values":{}}}}`)))
	f.Add([]byte(`{"type":"hello","num_connections":1,"debug_info":{"host":"applink-1","approximate_connection_time":18060},"connection_info":{"app_id":"A0AGENTGATE"}}`))
	f.Add([]byte(`{"type":"disconnect","reason":"refresh_requested","debug_info":{"host":"applink-1"}}`))
	f.Add([]byte(`{"envelope_id":"x","type":"events_api","payload":null}`))
	s := &Socket{cfg: SocketConfig{Parser: testParser}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var env socketmode.Request
		if json.Unmarshal(raw, &env) != nil {
			return // slack-go reports the frame unreadable; nothing reaches the parser
		}
		switch env.Type { // as socketmode.Client.parseEvent
		case socketmode.RequestTypeEventsAPI:
			_, _ = slackevents.ParseEvent(env.Payload, slackevents.OptionNoVerifyToken())
		case socketmode.RequestTypeSlashCommands:
			var cmd slackapi.SlashCommand
			_ = json.Unmarshal(env.Payload, &cmd)
		case socketmode.RequestTypeInteractive:
			var cb slackapi.InteractionCallback
			_ = json.Unmarshal(env.Payload, &cb)
		}
		req, err := s.parse(env)
		checkParsed(t, req, err)
	})
}
