package discord

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// HandlerConfig configures the Handler.
type HandlerConfig struct {
	// PublicKey verifies interactions over HTTP (DISCORD_PUBLIC_KEY, hex).
	// Empty: interactions come over the Gateway only, and every HTTP
	// request is refused.
	PublicKey string
	// ApplicationID is the application's id (DISCORD_APPLICATION_ID).
	ApplicationID string
	// BotUserID is the bot's user id, to tell its mentions and messages.
	BotUserID string
	Client    *Client // required
	// Engine, Inbox, DefaultAgent (for channels not in Channels), Blobs,
	// NodeID, Clock, Logger.
	chat.Intake
	// Sessions (required), Channels (by a thread's parent channel),
	// ThreadFollowUps, IgnoreBots.
	chat.Threads
	// Interact serves approval clicks and application commands.
	Interact InteractConfig
}

// Handler turns Discord messages and interactions into runs, decisions and
// command answers: ServeHTTP serves POST /discord/interactions, Gateway
// feeds it the Gateway's dispatches, and Start runs the inbox.
type Handler struct {
	cfg   HandlerConfig
	log   *slog.Logger
	key   ed25519.PublicKey
	inbox *chat.Inbox

	channels *chat.Cache[string, channelInfo]
	after    sync.WaitGroup
}

// NewHandler checks cfg and returns the handler.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if err := cfg.Check(chat.PlatformDiscord); err != nil {
		return nil, err
	}
	if cfg.Sessions == nil || cfg.Client == nil {
		return nil, errors.New("discord: the handler needs a session store and a client")
	}
	h := &Handler{cfg: cfg, log: cfg.Logger, channels: chat.NewCache[string, channelInfo](maxChannels)}
	if cfg.PublicKey != "" {
		k, err := ParsePublicKey(cfg.PublicKey)
		if err != nil {
			return nil, err
		}
		h.key = k
	}
	var err error
	h.inbox, err = chat.NewIntakeInbox(cfg.Intake, chat.PlatformDiscord, h.start)
	return h, err
}

// ParsePublicKey reads the application's public key (hex, as the Developer
// Portal shows it).
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, errors.New("DISCORD_PUBLIC_KEY: must be the application's public key, 64 hex digits (Developer Portal → General Information)")
	}
	return ed25519.PublicKey(b), nil
}

// inboxEntry is what the inbox keeps of a Discord message.
type inboxEntry struct {
	Message chat.Inbound `json:"message"`
	// Parent is the channel that routes the message to an agent: the
	// thread's parent channel, or the DM channel.
	Parent string `json:"parent,omitempty"`
	// OpenThread: a mention in a channel; the answer opens a thread on it.
	OpenThread bool `json:"open_thread,omitempty"`
}

// Start runs the inbox writer and processor until ctx ends, then waits for
// the command answers in flight.
func (h *Handler) Start(ctx context.Context) error {
	defer h.after.Wait()
	return h.inbox.Run(ctx)
}

// Message accepts a Gateway MESSAGE_CREATE: a mention in a channel (which
// opens a thread), a message in a thread the bot is part of, or a direct
// message. Others are dropped. An error means it was not accepted.
func (h *Handler) Message(ctx context.Context, m *discordgo.Message) error {
	e, ok, err := h.entry(ctx, m)
	if !ok || err != nil {
		return err
	}
	return h.inbox.Append(ctx, "msg:"+m.ID, e)
}

// entry is what the inbox keeps of m; ok is false for a message that is
// not for the bot.
func (h *Handler) entry(ctx context.Context, m *discordgo.Message) (e inboxEntry, ok bool, err error) {
	if m == nil || m.Author == nil || m.Author.ID == h.cfg.BotUserID || m.Author.Bot && h.cfg.IgnoreBots {
		return e, false, nil
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return e, false, nil
	}
	in := chat.Inbound{
		Platform: chat.PlatformDiscord, Workspace: m.GuildID, Channel: m.ChannelID, MessageID: m.ID,
		UserID: m.Author.ID, UserName: m.Author.Username, FromBot: m.Author.Bot, At: m.Timestamp,
		DirectMessage: m.GuildID == "",
	}
	for _, u := range m.Mentions {
		in.Mentioned = in.Mentioned || u.ID == h.cfg.BotUserID
	}
	in.Text = stripMention(m.Content, h.cfg.BotUserID)
	for _, a := range m.Attachments {
		if a != nil && a.URL != "" {
			in.Files = append(in.Files, chat.InFile{Ref: a.URL, Name: a.Filename, MIME: a.ContentType, Size: int64(a.Size)})
		}
	}
	if strings.TrimSpace(in.Text) == "" && len(in.Files) == 0 {
		return e, false, nil
	}
	e.Parent = m.ChannelID
	if !in.DirectMessage {
		ch, err := h.channel(ctx, m.ChannelID)
		if err != nil {
			return e, false, err
		}
		switch {
		case ch.Thread && (in.Mentioned || h.cfg.ThreadFollowUps):
			in.Thread, e.Parent = m.ChannelID, ch.Parent
		case !ch.Thread && in.Mentioned:
			// The answer opens a thread on the message; a thread started
			// from a message has the message's id.
			in.Channel, in.Thread, e.OpenThread = m.ID, m.ID, true
		default:
			return e, false, nil
		}
	}
	e.Message = in
	return e, true, nil
}

func stripMention(text, bot string) string {
	if bot != "" {
		text = strings.NewReplacer("<@"+bot+">", "", "<@!"+bot+">", "").Replace(text)
	}
	return strings.TrimSpace(text)
}

// How long the handler keeps what it looked up of a channel (whether it is
// a thread, its parent), and of how many channels at most.
const (
	channelTTL  = time.Hour
	maxChannels = 10_000
)

// channel looks a channel up, once an hour.
func (h *Handler) channel(ctx context.Context, id string) (channelInfo, error) {
	if ch, ok := h.channels.Get(id, h.cfg.Clock.Now()); ok {
		return ch, nil
	}
	ch, err := h.cfg.Client.channel(ctx, id)
	if err != nil {
		return ch, err
	}
	h.channels.Put(id, ch, h.cfg.Clock.Now(), channelTTL)
	return ch, nil
}

// start starts the run of a stored message: it picks the agent, checks that
// the bot is part of a thread it was not mentioned in, opens the thread of a
// mention in a channel, and submits the run (deduped by key). Errors are an
// InboxHandler's.
func (h *Handler) start(ctx context.Context, key string, e inboxEntry) error {
	in := e.Message
	agent, sid, err := h.cfg.Route(ctx, e.Parent, h.cfg.DefaultAgent, in)
	if err != nil {
		return err
	}
	if e.OpenThread {
		if err := h.cfg.Client.StartThread(ctx, e.Parent, in.MessageID, threadName(in.Text)); err != nil {
			return err
		}
	}
	files := h.cfg.Files(chat.FetchRef(h.cfg.Client.Download), func(ctx context.Context, text string) {
		if _, err := h.cfg.Client.Post(ctx, in.Channel, Message{Content: escape(text)}); err != nil {
			h.log.Warn("discord: telling of a file too large", "channel", in.Channel, "err", err)
		}
	})
	return chat.Start(ctx, h.cfg.Engine, files, agent, sid, key, in, core.Binding{Workspace: in.Workspace, Channel: in.Channel})
}

// threadName names a thread after the message that opened it (Discord
// takes up to 100 characters).
func threadName(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > 80 {
		text = string(r[:79]) + "…"
	}
	if text == "" {
		return "agentgate"
	}
	return text
}

// since is how long ago the snowflake id was made.
func (h *Handler) since(id string) time.Duration {
	t, err := discordgo.SnowflakeTimestamp(id)
	if err != nil {
		return 0
	}
	return h.cfg.Clock.Now().Sub(t)
}
