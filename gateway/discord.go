package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
	"github.com/agentgate/agentgate/core/lease"
	ichat "github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/discord"
)

// leaseDiscordGateway: one replica holds the Gateway connection (every
// connection would receive every message).
const leaseDiscordGateway = "discord-gateway"

// discordWiring is the Discord interface, when configured.
type discordWiring struct {
	notifier *discord.Notifier // answers, approval cards and routine results
	// handler is built once the engine exists; it serves
	// /discord/interactions and the Gateway's dispatches.
	newHandler func(eng *core.Engine, aps ichat.Decider, rt ichat.RoutineRunner, blobs core.Blobs) (*discord.Handler, error)
}

// newDiscord builds the Discord interface from interfaces.discord and the
// DISCORD_* environment; nil when interfaces.discord is not configured. It
// checks the token and registers /agentgate when DISCORD_APPLICATION_ID is
// set.
func newDiscord(ctx context.Context, cfg *config.Config, db storeDB, nodeID string, clock core.Clock, log *slog.Logger, api ichat.APIObserver) (*discordWiring, error) {
	dc := cfg.Interfaces.Discord
	if dc == nil {
		return nil, nil
	}
	token, pub, appID := os.Getenv("DISCORD_BOT_TOKEN"), os.Getenv("DISCORD_PUBLIC_KEY"), os.Getenv("DISCORD_APPLICATION_ID")
	if token == "" {
		return nil, &UsageError{"interfaces.discord is configured but DISCORD_BOT_TOKEN is not set: set it to the bot's token (Developer Portal → Bot → Reset Token)"}
	}
	if pub != "" {
		if _, err := discord.ParsePublicKey(pub); err != nil {
			return nil, &UsageError{err.Error()}
		}
	}
	client, err := discord.NewClient(discord.ClientConfig{Token: token, APIURL: os.Getenv("DISCORD_API_URL"), Logger: log,
		Transport: ichat.Counted(ichat.PlatformDiscord, nil, api)})
	if err != nil {
		return nil, &UsageError{err.Error()}
	}
	me, err := client.Me(ctx)
	if err != nil {
		return nil, fmt.Errorf("discord: check DISCORD_BOT_TOKEN: %w", err)
	}
	if appID == "" {
		log.Warn("DISCORD_APPLICATION_ID is not set: /agentgate is not registered")
	} else if err := client.RegisterCommands(ctx, appID, discord.Commands()); err != nil {
		return nil, fmt.Errorf("discord: register /agentgate for application %s (DISCORD_APPLICATION_ID): %w", appID, err)
	}
	notifier, err := discord.NewNotifier(ichat.NotifierConfig[*discord.Client]{Outbox: db, Client: client, Clock: clock, Logger: log})
	if err != nil {
		return nil, err
	}
	log.Info("discord enabled", "bot_user", me.ID, "interactions_over_http", pub != "")
	return &discordWiring{notifier: notifier, newHandler: func(eng *core.Engine, aps ichat.Decider, rt ichat.RoutineRunner, blobs core.Blobs) (*discord.Handler, error) {
		return discord.NewHandler(discord.HandlerConfig{
			Threads:   ichat.Threads{Sessions: db, Channels: dc.Channels, ThreadFollowUps: dc.ThreadFollowUps(), IgnoreBots: dc.IgnoresBots()},
			Intake:    ichat.Intake{Blobs: blobs, Engine: eng, DefaultAgent: dc.DefaultAgent, Inbox: db, NodeID: nodeID, Clock: clock, Logger: log},
			PublicKey: pub, ApplicationID: appID, BotUserID: me.ID, Client: client,
			Interact: discord.InteractConfig{Approvals: aps, Store: db, Routines: rt},
		})
	}}, nil
}

// gateway runs h's Gateway connection on the replica holding its lease.
func (w *discordWiring) gateway(leases lease.Store, nodeID string, log *slog.Logger, h *discord.Handler) func(context.Context) error {
	return func(ctx context.Context) error {
		lease.Run(ctx, leases, leaseDiscordGateway, nodeID, leaseTTL, log, func(ctx context.Context) {
			if err := h.RunGateway(ctx); err != nil {
				log.Error("discord gateway stopped", "err", err)
			}
		})
		return nil
	}
}
