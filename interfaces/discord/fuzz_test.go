package discord_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentgate/agentgate/core/lease/leasetest"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/discord"
	"github.com/agentgate/agentgate/interfaces/discord/discordtest"
)

// fuzzHandler is a handler against the fake Discord, with the bot, agents
// and options of the tests' newEnv, and no approval service (a click is
// answered that approvals are not available), on fuzzClock.
func fuzzHandler(f *testing.F, publicKey string) (*discord.Handler, *recordSubmitter) {
	f.Helper()
	fake := discordtest.NewServer()
	f.Cleanup(fake.Close)
	log := slog.New(slog.DiscardHandler)
	client, err := discord.NewClient(discord.ClientConfig{Token: discordtest.Token, APIURL: fake.APIURL(), Logger: log})
	if err != nil {
		f.Fatal(err)
	}
	fake.AddThread(thread, channel)
	runs := &recordSubmitter{}
	h, err := discord.NewHandler(discord.HandlerConfig{
		Threads:   chat.Threads{Sessions: nil0{}, Channels: map[string]string{channel: "deployer"}, ThreadFollowUps: true, IgnoreBots: true},
		Intake:    chat.Intake{Engine: runs, DefaultAgent: "ops", Logger: log, Clock: fuzzClock, Inbox: testInbox(f)},
		PublicKey: publicKey, ApplicationID: discordtest.AppID, BotUserID: discordtest.BotID,
		Client: client,
	})
	if err != nil {
		f.Fatal(err)
	}
	return h, runs
}

// fuzzClock is the handlers' clock: signed timestamps of the seeds stay
// fresh.
var fuzzClock = leasetest.NewClock()

// watchdog fails the input (by crashing the worker, which the fuzzer
// reports with the input) when the handler takes longer than d.
func watchdog(d time.Duration, what string, input []byte) func() bool {
	return time.AfterFunc(d, func() { panic(fmt.Sprintf("%s still running after %s on %q", what, d, input)) }).Stop
}

// FuzzGatewayDispatch feeds Gateway frames to the handler as discordgo
// hands them on: the frame is decoded, a MESSAGE_CREATE or
// INTERACTION_CREATE dispatch's data is decoded into its event (discordgo
// passes the event on even when that fails, half filled), and the handler
// gets it. A message starts a run only with text for the bot, from someone
// else, deduped by its id; an interaction is answered; nothing panics.
func FuzzGatewayDispatch(f *testing.F) {
	dispatch := func(t string, d any) []byte {
		b, err := json.Marshal(map[string]any{"op": 0, "s": 42, "t": t, "d": d})
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	raw, err := os.ReadFile("testdata/message_create.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(dispatch("MESSAGE_CREATE", json.RawMessage(raw)))
	fake := discordtest.NewServer() // only for its payload builders
	f.Cleanup(fake.Close)
	const user = "500000000000000009"
	f.Add(dispatch("MESSAGE_CREATE", fake.MessageCreate(channel, discordtest.GuildID, user, "deploy web please", true)))
	f.Add(dispatch("MESSAGE_CREATE", fake.MessageCreate(channel, discordtest.GuildID, user, "lunch?", false)))
	f.Add(dispatch("MESSAGE_CREATE", fake.MessageCreate(thread, discordtest.GuildID, user, "and api", false)))
	f.Add(dispatch("MESSAGE_CREATE", fake.MessageCreate("1300000000000000042", "", user, "hi", false)))
	f.Add(dispatch("MESSAGE_CREATE", fake.MessageCreate(channel, discordtest.GuildID, discordtest.BotID, "my own", true)))
	f.Add(dispatch("MESSAGE_CREATE", map[string]any{"id": "1", "channel_id": "../users/@me", "content": "<@!" + discordtest.BotID + ">   ",
		"author": map[string]any{"id": user}, "mentions": []any{map[string]any{"id": discordtest.BotID}}, "type": 19}))
	raw, err = os.ReadFile("testdata/interaction_button.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(dispatch("INTERACTION_CREATE", json.RawMessage(raw)))
	f.Add(dispatch("INTERACTION_CREATE", fake.Interaction(1, channel, user, nil, nil)))
	f.Add(dispatch("INTERACTION_CREATE", fake.Interaction(3, thread, user, []string{oncall}, discordtest.Button("agentgate:approve:apr_0123456789abcdef"))))
	f.Add(dispatch("INTERACTION_CREATE", fake.Interaction(2, channel, user, nil, discordtest.Command("run", map[string]string{"routine": "daily-digest", "input": "only prod"}))))
	f.Add(dispatch("INTERACTION_CREATE", fake.Interaction(2, channel, user, nil, discordtest.Command("approvals", nil))))
	f.Add(dispatch("INTERACTION_CREATE", fake.Interaction(5, channel, user, nil, map[string]any{"custom_id": "x"})))
	// Found by this target: an interaction whose data does not decode
	// reaches the handler without data, which crashed the gateway
	// (discordgo's MessageComponentData and ApplicationCommandData panic).
	f.Add([]byte(`{"op":0,"t":"INTERACTION_CREATE","d":{"id":"1","type":3,"channel_id":"1"}}`))
	f.Add([]byte(`{"op":0,"t":"INTERACTION_CREATE","d":{"id":"1","type":2,"data":{"name":"agentgate","options":"run"}}}`))
	f.Add([]byte(`{"op":0,"t":"INTERACTION_CREATE","d":{"id":"1","type":4,"data":7}}`))
	f.Add([]byte(`{"op":11}`))
	f.Add([]byte(`{"op":0,"t":"MESSAGE_CREATE","d":null}`))

	h, runs := fuzzHandler(f, "")
	f.Fuzz(func(t *testing.T, frame []byte) {
		var e *discordgo.Event
		if json.Unmarshal(frame, &e) != nil || e == nil || e.Operation != 0 {
			return // not a dispatch: discordgo handles it itself
		}
		defer watchdog(20*time.Second, "the handler", frame)()
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		switch e.Type {
		case "MESSAGE_CREATE":
			var m discordgo.MessageCreate
			_ = json.Unmarshal(e.RawData, &m) // as discordgo: passed on half filled
			before := len(runs.all())
			_ = h.StartNow(ctx, m.Message) // Message's parsing, then the run at once; an error is a message not accepted
			for _, r := range runs.all()[before:] {
				checkRun(t, m.Message, r.Input, r.UserID, r.DedupeKey, r.AgentID)
			}
		case "INTERACTION_CREATE":
			var ic discordgo.InteractionCreate
			_ = json.Unmarshal(e.RawData, &ic)
			if ic.Interaction == nil {
				return
			}
			resp, after, err := h.Interaction(ctx, ic.Interaction)
			if err == nil && resp == nil {
				t.Fatalf("interaction %s answered nothing", e.RawData)
			}
			if after != nil {
				after(ctx)
			}
		}
	})
}

// checkRun asserts what a run started from Gateway message m must be.
func checkRun(t *testing.T, m *discordgo.Message, input, user, key, agent string) {
	t.Helper()
	switch {
	case m == nil || m.Author == nil:
		t.Fatalf("a run started from a message without an author: %q", input)
	case strings.TrimSpace(input) == "" || input != strings.TrimSpace(input):
		t.Fatalf("message %s started a run with input %q", m.ID, input)
	case strings.Contains(input, "<@"+discordtest.BotID+">") || strings.Contains(input, "<@!"+discordtest.BotID+">"):
		t.Fatalf("message %s: the input %q still mentions the bot", m.ID, input)
	case user == discordtest.BotID || user != m.Author.ID || m.Author.Bot:
		t.Fatalf("message %s by %+v started a run as %q", m.ID, m.Author, user)
	case key != "msg:"+m.ID:
		t.Fatalf("message %s started a run with dedupe key %q", m.ID, key)
	case agent != "ops" && agent != "deployer":
		t.Fatalf("message %s started a run of agent %q", m.ID, agent)
	}
}

// FuzzInteractionHTTP feeds POST /discord/interactions requests with fuzzed
// bodies and signature headers to the handler: a request not signed with
// the application's key, or signed more than MaxInteractionAge from now, is
// refused with 401 whatever it holds; a signed one is answered with an
// interaction response (200) or refused as malformed (400), never a 5xx,
// never a panic.
func FuzzInteractionHTTP(f *testing.F) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/interaction_button.json")
	if err != nil {
		f.Fatal(err)
	}
	now := strconv.FormatInt(fuzzClock.Now().Unix(), 10)
	for _, body := range []string{
		`{"id":"1300000000000000001","application_id":"222222222222222222","type":1,"token":"t","version":1}`,
		string(raw),
		`{"type":3,"data":{"custom_id":"agentgate:approve:apr_1","component_type":2},"member":{"user":{"id":"1"}}}`,
		`{"type":2,"data":{"name":"agentgate","options":[{"name":"run","type":1,"options":[{"name":"routine","type":3,"value":7}]}]}}`,
		`{"type":2,"data":{"name":"other"}}`, `{"type":3}`, `{"type":2,"data":"x"}`, `{"type":4,"data":{}}`, `[]`, ``,
	} {
		f.Add([]byte(body), now, "", true)
	}
	f.Add([]byte(`{"type":1}`), strconv.FormatInt(fuzzClock.Now().Add(-discord.MaxInteractionAge).Unix(), 10), "", true)
	f.Add([]byte(`{"type":1}`), strconv.FormatInt(fuzzClock.Now().Add(time.Hour).Unix(), 10), "", true) // stale: a replay
	f.Add([]byte(`{"type":1}`), "+"+now, "", true)
	f.Add([]byte(`{"type":1}`), now, strings.Repeat("00", ed25519.SignatureSize), false)
	f.Add([]byte(`{"type":1}`), "", "zz", false)
	h, _ := fuzzHandler(f, hex.EncodeToString(pub))
	f.Fuzz(func(t *testing.T, body []byte, ts, sig string, signIt bool) {
		if signIt { // a signed request is fresh: stale ones are refused (401) before the signature
			ts = strconv.FormatInt(time.Now().Unix(), 10)
			sig = hex.EncodeToString(ed25519.Sign(priv, append([]byte(ts), body...)))
		}
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/discord/interactions", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Signature-Timestamp", ts)
		req.Header.Set("X-Signature-Ed25519", sig)
		secs, err := strconv.ParseInt(req.Header.Get("X-Signature-Timestamp"), 10, 64)
		fresh := err == nil && fuzzClock.Now().Sub(time.Unix(secs, 0)).Abs() <= discord.MaxInteractionAge
		signed := signIt && fresh
		defer watchdog(20*time.Second, "ServeHTTP", body)()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch {
		case !signed && w.Code != http.StatusUnauthorized:
			t.Fatalf("request %q unsigned or signed at %q answered %d %s, want 401", body, ts, w.Code, w.Body)
		case signed && w.Code == http.StatusOK:
			var resp discordgo.InteractionResponse
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.Type == 0 {
				t.Fatalf("signed request %q answered 200 %s: not an interaction response (%v)", body, w.Body, err)
			}
		case signed && w.Code != http.StatusBadRequest:
			t.Fatalf("signed request %q answered %d %s, want 200 or 400", body, w.Code, w.Body)
		}
	})
}
