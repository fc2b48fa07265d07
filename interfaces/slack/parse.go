package slack

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/tidwall/gjson"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Kind says what a request to /slack/events carried.
type Kind int

// Request kinds.
const (
	// KindIgnored: acknowledge with 200 and do nothing (Request.Ignored says why).
	KindIgnored Kind = iota
	// KindURLVerification: answer with Request.Challenge.
	KindURLVerification
	// KindMessage: Request.Message is set.
	KindMessage
	// KindAction: Request.Action is set (an approve/deny click).
	KindAction
	// KindCommand: Request.Command is set.
	KindCommand
)

var kindNames = [...]string{"ignored", "url_verification", "message", "action", "command"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Request is one parsed, not yet verified-for-policy, request from Slack.
type Request struct {
	Kind      Kind
	Challenge string // KindURLVerification
	Ignored   string // KindIgnored: the reason, for logs and metrics

	// DedupeKey is the inbox key (platform "slack") for this request:
	//   message: "msg:{channel}:{ts}", the same for the app_mention and the
	//            message event of one post and for every retry of either;
	//   action:  "action:{action_id}:{trigger_id}";
	//   command: "command:{trigger_id}".
	DedupeKey string
	// EventID is the Events API event_id (events only); retries reuse it.
	EventID string

	Message *chat.Inbound
	Action  *chat.Action
	Command *chat.Command
}

// ErrMalformed wraps every parse failure: the body is not a Slack request
// we understand. Handlers answer 400.
var ErrMalformed = errors.New("slack: malformed request")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Parser turns request bodies into Requests. The zero value works but cannot
// recognise the bot's own messages or mentions; set BotUserID (auth.test's
// user_id) and BotID (auth.test's bot_id).
type Parser struct {
	BotUserID string // "U0LAN0Z89": the bot user, as mentioned in text
	BotID     string // "B01234": the bot id on messages the app posts
}

// Parse reads an HTTP request body sent to /slack/events: Events API JSON,
// an interactivity payload (form field "payload") or a slash command (form).
// Verify the signature first; Parse trusts nothing but checks nothing either.
func (p Parser) Parse(h http.Header, body []byte) (Request, error) {
	ct := h.Get("Content-Type")
	if ct != "application/json" { // what the Events API sends: nothing to parse
		ct, _, _ = mime.ParseMediaType(ct)
	}
	switch {
	case ct == "application/json" || (ct == "" && len(bytes.TrimSpace(body)) > 0 && bytes.TrimSpace(body)[0] == '{'):
		return p.ParseEvent(body)
	case ct == "application/x-www-form-urlencoded" || ct == "":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return Request{}, malformed("form body: %v", err)
		}
		if payload := form.Get("payload"); payload != "" {
			return p.ParseInteraction([]byte(payload))
		}
		if form.Get("ssl_check") == "1" {
			return Request{Kind: KindIgnored, Ignored: "ssl_check"}, nil
		}
		if form.Get("command") != "" {
			return commandRequest(commandFromForm(form))
		}
		return Request{}, malformed("form has neither payload nor command")
	}
	return Request{}, malformed("unsupported content type %q", ct)
}

// envelope is the Events API outer event. The inner event is decoded into the
// few fields we use rather than slackevents' full types.
type envelope struct {
	Type      string
	Challenge string
	TeamID    string
	EventID   string
	Event     *innerEvent
}

func (e *envelope) field(key string) *string {
	switch key {
	case "type":
		return &e.Type
	case "challenge":
		return &e.Challenge
	case "team_id":
		return &e.TeamID
	case "event_id":
		return &e.EventID
	}
	return nil
}

type innerEvent struct {
	Type, SubType, User, BotID, Username, Text, TS, ThreadTS, Channel, ChannelType, Team string
	Files                                                                                []chat.InFile
}

// decodeFiles reads a message's files: what a file share attached. A file
// without a download URL (a Slack Connect file not shared yet, a deleted
// one) is left out.
func decodeFiles(v gjson.Result) []chat.InFile {
	var out []chat.InFile
	v.ForEach(func(_, f gjson.Result) bool {
		url := cmp.Or(f.Get("url_private_download").Str, f.Get("url_private").Str)
		if url != "" {
			out = append(out, chat.InFile{Ref: url, Name: f.Get("name").Str, MIME: f.Get("mimetype").Str, Size: f.Get("size").Int()})
		}
		return true
	})
	return out
}

func (e *innerEvent) field(key string) *string {
	switch key {
	case "type":
		return &e.Type
	case "subtype":
		return &e.SubType
	case "user":
		return &e.User
	case "bot_id":
		return &e.BotID
	case "username":
		return &e.Username
	case "text":
		return &e.Text
	case "ts":
		return &e.TS
	case "thread_ts":
		return &e.ThreadTS
	case "channel":
		return &e.Channel
	case "channel_type":
		return &e.ChannelType
	case "team":
		return &e.Team
	}
	return nil
}

// decodeEnvelope decodes an Events API body in one pass (gjson), skipping
// what it does not need (blocks and attachments are most of a message
// event's bytes); on the ingress hot path that costs a third of
// encoding/json, which checks the whole body and then decodes it by
// reflection. Keys match exactly (Slack sends them in lower case); a field
// we read that is neither a string nor null is malformed, as with
// encoding/json.
func decodeEnvelope(body []byte) (envelope, error) {
	if !gjson.ValidBytes(body) {
		return envelope{}, errors.New("not valid JSON")
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return envelope{}, errors.New("not a JSON object")
	}
	var env envelope
	var err error
	set := func(dst *string, key string, v gjson.Result) bool {
		switch v.Type {
		case gjson.String:
			*dst = v.Str
		case gjson.Null:
		default:
			err = fmt.Errorf("%s is not a string", key)
		}
		return err == nil
	}
	root.ForEach(func(k, v gjson.Result) bool {
		if k.Str != "event" {
			if dst := env.field(k.Str); dst != nil {
				return set(dst, k.Str, v)
			}
			return true
		}
		switch {
		case v.Type == gjson.Null:
			env.Event = nil
		case !v.IsObject():
			err = errors.New("event is not an object")
		default:
			ev := &innerEvent{}
			v.ForEach(func(k, v gjson.Result) bool {
				if k.Str == "files" && v.IsArray() {
					ev.Files = decodeFiles(v)
					return true
				}
				if dst := ev.field(k.Str); dst != nil {
					return set(dst, "event."+k.Str, v)
				}
				return true
			})
			env.Event = ev
		}
		return err == nil
	})
	return env, err
}

// ParseEvent parses an Events API body (HTTP) or a Socket Mode "events_api"
// envelope's payload: url_verification, or event_callback carrying
// app_mention or message.
func (p Parser) ParseEvent(body []byte) (Request, error) {
	env, err := decodeEnvelope(body)
	if err != nil {
		return Request{}, malformed("events body: %v", err)
	}
	switch env.Type {
	case "url_verification":
		if env.Challenge == "" {
			return Request{}, malformed("url_verification without challenge")
		}
		return Request{Kind: KindURLVerification, Challenge: env.Challenge}, nil
	case "event_callback":
	case "app_rate_limited":
		return Request{Kind: KindIgnored, Ignored: "app_rate_limited"}, nil
	case "":
		return Request{}, malformed("events body has no type")
	default:
		return Request{Kind: KindIgnored, Ignored: "envelope " + env.Type}, nil
	}
	if env.EventID == "" || env.Event == nil {
		return Request{}, malformed("event_callback without event_id or event")
	}
	ev := *env.Event
	req := Request{EventID: env.EventID}
	switch ev.Type {
	case "app_mention", "message":
	default:
		req.Ignored = "event " + ev.Type
		return req, nil
	}
	switch ev.SubType {
	case "", "bot_message", "thread_broadcast", "file_share", "me_message":
	default: // message_changed, message_deleted, channel_join, …
		req.Ignored = "message subtype " + ev.SubType
		return req, nil
	}
	if ev.Channel == "" || ev.TS == "" {
		return Request{}, malformed("%s event without channel or ts", ev.Type)
	}
	if p.own(ev) {
		req.Ignored = "own message"
		return req, nil
	}
	workspace := cmp.Or(env.TeamID, ev.Team)
	dm := ev.ChannelType == "im" || (ev.ChannelType == "" && strings.HasPrefix(ev.Channel, "D"))
	thread := ev.ThreadTS
	if thread == "" && !dm {
		thread = ev.TS // the reply opens a thread on this message
	}
	text, mentioned := p.stripMention(ev.Text)
	in := &chat.Inbound{
		Platform:      chat.PlatformSlack,
		Workspace:     workspace,
		Channel:       ev.Channel,
		Thread:        thread,
		MessageID:     ev.TS,
		UserID:        ev.User,
		UserName:      ev.Username,
		Text:          text,
		Mentioned:     mentioned || ev.Type == "app_mention",
		FromBot:       ev.BotID != "" || ev.SubType == "bot_message",
		DirectMessage: dm,
		At:            tsTime(ev.TS),
		Files:         ev.Files,
	}
	req.Kind = KindMessage
	req.DedupeKey = "msg:" + ev.Channel + ":" + ev.TS
	req.Message = in
	return req, nil
}

func (p Parser) own(ev innerEvent) bool {
	return (p.BotUserID != "" && ev.User == p.BotUserID) || (p.BotID != "" && ev.BotID == p.BotID)
}

// stripMention removes the bot's mentions (<@U123> or <@U123|name>) and
// reports whether there was one.
func (p Parser) stripMention(text string) (string, bool) {
	if p.BotUserID == "" {
		return strings.TrimSpace(text), false
	}
	mentioned := false
	var b strings.Builder
	rest := text
	for {
		i := strings.Index(rest, "<@"+p.BotUserID)
		if i < 0 {
			b.WriteString(rest)
			break
		}
		after := rest[i+2+len(p.BotUserID):]
		end := strings.IndexByte(after, '>')
		if end < 0 || (end > 0 && after[0] != '|') {
			// "<@U1234…" of a longer id, or unterminated: keep it.
			b.WriteString(rest[:i+2])
			rest = rest[i+2:]
			continue
		}
		mentioned = true
		b.WriteString(rest[:i])
		rest = after[end+1:]
	}
	return strings.Join(strings.Fields(b.String()), " "), mentioned
}

// tsTime converts a Slack ts ("1700000000.000100") to a time; zero if malformed.
func tsTime(ts string) time.Time {
	secs, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || s < 0 {
		return time.Time{}
	}
	var us int64
	if len(frac) == 6 {
		us, _ = strconv.ParseInt(frac, 10, 64)
	}
	return time.Unix(s, us*1000).UTC()
}

// ParseInteraction parses an interactivity payload: the JSON in the HTTP
// form field "payload", or a Socket Mode "interactive" envelope's payload.
// block_actions on our approve/deny buttons become KindAction; anything else
// is ignored.
func (p Parser) ParseInteraction(payload []byte) (Request, error) {
	var cb slackapi.InteractionCallback
	if err := json.Unmarshal(payload, &cb); err != nil {
		return Request{}, malformed("interaction payload: %v", err)
	}
	if cb.Type == slackapi.InteractionTypeViewSubmission && cb.View.CallbackID == denyCallbackID {
		return parseDenySubmission(cb)
	}
	if cb.Type != slackapi.InteractionTypeBlockActions {
		return Request{Kind: KindIgnored, Ignored: "interaction " + string(cb.Type)}, nil
	}
	var act *slackapi.BlockAction
	for _, a := range cb.ActionCallback.BlockActions {
		if a != nil && (a.ActionID == chat.ActionApprove || a.ActionID == chat.ActionDeny) {
			act = a
			break
		}
	}
	if act == nil {
		return Request{Kind: KindIgnored, Ignored: "block_actions without approve/deny"}, nil
	}
	if !core.ValidID(act.Value) {
		return Request{}, malformed("%s button value is not an approval id", act.ActionID)
	}
	if cb.User.ID == "" || cb.TriggerID == "" {
		return Request{}, malformed("block_actions without user or trigger_id")
	}
	channel := cmp.Or(cb.Container.ChannelID, cb.Channel.ID)
	ref := cmp.Or(cb.Container.MessageTs, cb.Message.Timestamp)
	thread := cmp.Or(cb.Container.ThreadTs, cb.Message.ThreadTimestamp)
	workspace := cmp.Or(cb.Team.ID, cb.User.TeamID)
	return Request{
		Kind:      KindAction,
		DedupeKey: "action:" + act.ActionID + ":" + cb.TriggerID,
		Action: &chat.Action{
			Platform:    chat.PlatformSlack,
			Workspace:   workspace,
			Channel:     channel,
			MessageRef:  ref,
			Thread:      thread,
			UserID:      cb.User.ID,
			ActionID:    act.ActionID,
			ApprovalID:  act.Value,
			ResponseURL: cb.ResponseURL,
			TriggerID:   cb.TriggerID,
			At:          tsTime(act.ActionTs),
		},
	}, nil
}

// ParseCommandJSON parses a Socket Mode "slash_commands" envelope's payload.
func (p Parser) ParseCommandJSON(payload []byte) (Request, error) {
	var sc slackapi.SlashCommand
	if err := json.Unmarshal(payload, &sc); err != nil {
		return Request{}, malformed("slash command payload: %v", err)
	}
	return commandRequest(sc)
}

func commandFromForm(f url.Values) slackapi.SlashCommand {
	return slackapi.SlashCommand{
		TeamID:      f.Get("team_id"),
		ChannelID:   f.Get("channel_id"),
		UserID:      f.Get("user_id"),
		UserName:    f.Get("user_name"),
		Command:     f.Get("command"),
		Text:        f.Get("text"),
		ResponseURL: f.Get("response_url"),
		TriggerID:   f.Get("trigger_id"),
	}
}

func commandRequest(sc slackapi.SlashCommand) (Request, error) {
	name := strings.TrimPrefix(sc.Command, "/")
	if name == "" || sc.UserID == "" || sc.TriggerID == "" {
		return Request{}, malformed("slash command without command, user_id or trigger_id")
	}
	return Request{
		Kind:      KindCommand,
		DedupeKey: "command:" + sc.TriggerID,
		Command: &chat.Command{
			Platform:    chat.PlatformSlack,
			Workspace:   sc.TeamID,
			Channel:     sc.ChannelID,
			UserID:      sc.UserID,
			UserName:    sc.UserName,
			Name:        name,
			Text:        strings.TrimSpace(sc.Text),
			ResponseURL: sc.ResponseURL,
			TriggerID:   sc.TriggerID,
		},
	}, nil
}
