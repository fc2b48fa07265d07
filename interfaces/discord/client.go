// Package discord puts agents into Discord: messages arrive over the Gateway
// (a mention in a channel opens a thread, one session per thread), approval
// buttons and /agentgate application commands arrive as interactions — signed
// HTTP requests to /discord/interactions or Gateway dispatches — and answers,
// approval cards and routine results are posted through the outbox with the
// REST API. Discord's wire types (discordgo) stay inside this package.
package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// DefaultAPIURL is Discord's REST API base (the version discordgo speaks);
// DISCORD_API_URL replaces it.
var DefaultAPIURL = strings.TrimSuffix(discordgo.EndpointAPI, "/")

// Intents the Gateway connection asks for: guild and direct messages, and
// their content (MESSAGE_CONTENT is privileged: switch it on under the
// application's Bot → Privileged Gateway Intents).
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages |
	discordgo.IntentsDirectMessages | discordgo.IntentMessageContent

// ClientConfig configures a Client.
type ClientConfig struct {
	// Token is the bot token (DISCORD_BOT_TOKEN). Required.
	Token string
	// APIURL is the REST API base (DISCORD_API_URL), default DefaultAPIURL:
	// tests and proxies point it elsewhere.
	APIURL string
	// Timeout bounds one HTTP request; default 30s.
	Timeout time.Duration
	// CDNURL is one more base (scheme and host) whose attachment URLs
	// Download fetches, besides https://cdn.discordapp.com and
	// https://media.discordapp.net: tests point it at their fake. Default
	// DefaultCDNURL.
	CDNURL string
	Logger *slog.Logger
	// Transport sends the REST requests; default http.DefaultTransport.
	Transport http.RoundTripper
}

// Client is Discord's REST API (and the Gateway session it opens), through
// discordgo: requests are queued per rate-limit bucket and a 429 is retried
// after its retry_after.
type Client struct {
	s   *discordgo.Session
	log *slog.Logger
	cdn []*url.URL   // bases whose URLs Download fetches
	dl  *http.Client // Download's client: no auth, redirects only to cdn
}

// NewClient checks cfg and returns the client; it makes no request.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Token == "" {
		return nil, errors.New("discord: a bot token is required")
	}
	chat.Defaults(nil, &cfg.Logger)
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	s, err := discordgo.New("Bot " + cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	rt := cfg.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if cfg.APIURL != "" && strings.TrimRight(cfg.APIURL, "/") != DefaultAPIURL {
		base, err := url.Parse(strings.TrimRight(cfg.APIURL, "/"))
		if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
			return nil, fmt.Errorf("DISCORD_API_URL: must be an absolute http(s) URL like %s, got %q", DefaultAPIURL, cfg.APIURL)
		}
		rt = rebase{base: base, next: rt}
	}
	s.Client = &http.Client{Timeout: cfg.Timeout, Transport: rt}
	cdn, err := cdnBases(cfg.CDNURL)
	if err != nil {
		return nil, err
	}
	s.UserAgent = "agentgate (https://github.com/agentgate/agentgate, 1)"
	s.MaxRestRetries = 3
	s.ShouldReconnectOnError = true
	s.StateEnabled = false
	s.Identify.Intents = Intents
	c := &Client{s: s, log: cfg.Logger, cdn: cdn}
	c.dl = &http.Client{Timeout: cfg.Timeout, Transport: http.DefaultTransport, CheckRedirect: c.checkRedirect}
	return c, nil
}

// rebase sends the requests discordgo addresses to discord.com's API to
// another base URL (DISCORD_API_URL).
type rebase struct {
	base *url.URL
	next http.RoundTripper
}

func (r rebase) RoundTrip(req *http.Request) (*http.Response, error) {
	rest, ok := strings.CutPrefix(req.URL.String(), discordgo.EndpointAPI)
	if !ok {
		return r.next.RoundTrip(req)
	}
	u, err := url.Parse(r.base.String() + "/" + rest)
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.URL, req.Host = u, u.Host
	return r.next.RoundTrip(req)
}

// ErrMaybePosted: the request may have reached Discord but its answer was
// lost; posting again could double the message.
var ErrMaybePosted = errors.New("discord: message may have been posted")

// classify turns a failed create into ErrMaybePosted unless Discord
// answered it (a refusal: nothing was posted).
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var rerr *discordgo.RESTError
	if errors.As(err, &rerr) && rerr.Response != nil && rerr.Response.StatusCode < 500 {
		return fmt.Errorf("discord %s: %w", op, err)
	}
	return fmt.Errorf("discord %s: %w: %w", op, ErrMaybePosted, err)
}

// Me returns the bot's user (GET /users/@me): it checks the token.
func (c *Client) Me(ctx context.Context) (*discordgo.User, error) {
	u, err := c.s.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("discord users/@me: %w", err)
	}
	return u, nil
}

// Message is what the gateway posts: text and optional components.
type Message struct {
	Content    string
	Components []discordgo.MessageComponent
}

var noMentions = &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}

// Post posts m in channel and returns the message id.
func (c *Client) Post(ctx context.Context, channel string, m Message) (string, error) {
	msg, err := c.s.ChannelMessageSendComplex(channel, &discordgo.MessageSend{
		Content: m.Content, Components: m.Components, AllowedMentions: noMentions,
	}, discordgo.WithContext(ctx))
	if err != nil {
		return "", classify("post message", err)
	}
	return msg.ID, nil
}

// Edit replaces message id in channel by m (no components removes them).
func (c *Client) Edit(ctx context.Context, channel, id string, m Message) error {
	comps := m.Components
	if comps == nil {
		comps = []discordgo.MessageComponent{}
	}
	_, err := c.s.ChannelMessageEditComplex(&discordgo.MessageEdit{
		ID: id, Channel: channel, Content: &m.Content, Components: &comps, AllowedMentions: noMentions,
	}, discordgo.WithContext(ctx))
	return wrap(err, "edit message "+id)
}

// wrap names the call err (nil: none) came from.
func wrap(err error, call string) error {
	if err != nil {
		return fmt.Errorf("discord %s: %w", call, err)
	}
	return nil
}

// Typing shows the bot typing in channel (Trigger Typing Indicator) for
// about 10 seconds, or until it posts there.
func (c *Client) Typing(ctx context.Context, channel string) error {
	return wrap(c.s.ChannelTyping(channel, discordgo.WithContext(ctx)), "typing in "+channel)
}

// StartThread opens a thread on message msg of channel (its id is msg's);
// a thread that exists already is no error.
func (c *Client) StartThread(ctx context.Context, channel, msg, name string) error {
	_, err := c.s.MessageThreadStartComplex(channel, msg, &discordgo.ThreadStart{Name: name, AutoArchiveDuration: 1440},
		discordgo.WithContext(ctx))
	var rerr *discordgo.RESTError
	if errors.As(err, &rerr) && rerr.Message != nil && rerr.Message.Code == discordgo.ErrCodeThreadAlreadyCreatedForThisMessage {
		return nil
	}
	return wrap(err, "start thread on "+msg)
}

// channelInfo is what the gateway needs of a channel.
type channelInfo struct {
	Thread bool
	Parent string
}

// Channel looks a channel up (GET /channels/{id}).
func (c *Client) channel(ctx context.Context, id string) (channelInfo, error) {
	ch, err := c.s.Channel(id, discordgo.WithContext(ctx))
	if err != nil {
		return channelInfo{}, fmt.Errorf("discord channel %s: %w", id, err)
	}
	return channelInfo{Thread: ch.IsThread(), Parent: ch.ParentID}, nil
}

// Respond answers an interaction that came over the Gateway
// (POST /interactions/{id}/{token}/callback).
func (c *Client) Respond(ctx context.Context, i *discordgo.Interaction, r *discordgo.InteractionResponse) error {
	return wrap(c.s.InteractionRespond(i, r, discordgo.WithContext(ctx)), "interaction response")
}

// Followup posts text as the follow-up of interaction i
// (POST /webhooks/{application_id}/{token}).
func (c *Client) Followup(ctx context.Context, i *discordgo.Interaction, text string, flags discordgo.MessageFlags) error {
	_, err := c.s.FollowupMessageCreate(i, true, &discordgo.WebhookParams{Content: text, Flags: flags, AllowedMentions: noMentions},
		discordgo.WithContext(ctx))
	return wrap(err, "follow-up")
}

// RegisterCommands sets the application's global commands to cmds
// (PUT /applications/{id}/commands).
func (c *Client) RegisterCommands(ctx context.Context, appID string, cmds []*discordgo.ApplicationCommand) error {
	_, err := c.s.ApplicationCommandBulkOverwrite(appID, "", cmds, discordgo.WithContext(ctx))
	return wrap(err, "register commands")
}
