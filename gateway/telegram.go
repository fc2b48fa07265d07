package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
	"github.com/agentgate/agentgate/core/lease"
	ichat "github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/telegram"
)

// leaseTelegramPoll: long polling runs on one replica.
const leaseTelegramPoll = "telegram-poller"

// telegramWiring is the Telegram interface, when configured.
type telegramWiring struct {
	// notifier posts answers, approval cards and routine results.
	notifier *telegram.Notifier
	// webhook reports whether updates come to POST /telegram/webhook
	// (TELEGRAM_WEBHOOK_SECRET set) rather than by long polling.
	webhook bool
	// newHandler is built once the engine exists.
	newHandler func(eng *core.Engine, aps ichat.Decider, rt ichat.RoutineRunner, blobs core.Blobs) (*telegram.Handler, error)
	// services are what Start runs for h: its inbox writer and processor,
	// and without a webhook the poller, under a lease.
	services func(h *telegram.Handler, leases lease.Store) []func(context.Context) error
}

// telegramSecretPattern is Telegram's secret_token (1–256 of A-Za-z0-9_-),
// at least 16 long: whoever guesses it can post forged updates, clicks on
// approval cards among them.
var telegramSecretPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{16,256}$`)

// newTelegram builds the Telegram interface from interfaces.telegram and
// the TELEGRAM_* environment; nil when interfaces.telegram is not set. It
// checks the token (getMe) and registers the bot's commands.
func newTelegram(ctx context.Context, cfg *config.Config, db storeDB, nodeID string, clock core.Clock, log *slog.Logger, api ichat.APIObserver) (*telegramWiring, error) {
	tc := cfg.Interfaces.Telegram
	if tc == nil {
		return nil, nil
	}
	token, secret := os.Getenv("TELEGRAM_BOT_TOKEN"), os.Getenv("TELEGRAM_WEBHOOK_SECRET")
	switch {
	case token == "":
		return nil, &UsageError{"interfaces.telegram is configured but TELEGRAM_BOT_TOKEN is not set: set it to the token @BotFather gave the bot (123456:ABC-…)"}
	case secret != "" && !telegramSecretPattern.MatchString(secret):
		return nil, &UsageError{"TELEGRAM_WEBHOOK_SECRET: must be 16-256 characters of A-Z, a-z, 0-9, _ and - (Telegram's secret_token; whoever guesses it can forge updates), e.g. the output of `openssl rand -hex 32`; unset it to receive updates by long polling"}
	}
	client, err := telegram.NewClient(telegram.ClientConfig{Token: token, APIURL: os.Getenv("TELEGRAM_API_URL"), Logger: log,
		HTTPClient: &http.Client{Timeout: 60 * time.Second, Transport: ichat.Counted(ichat.PlatformTelegram, nil, api)}})
	if err != nil {
		return nil, err
	}
	me, err := client.Me(ctx)
	if err != nil {
		return nil, fmt.Errorf("telegram: check the bot token: %w", err)
	}
	if err := client.SetCommands(ctx, telegram.Commands); err != nil {
		log.Warn("telegram: could not register the bot's commands (setMyCommands)", "err", err)
	}
	notifier, err := telegram.NewNotifier(ichat.NotifierConfig[*telegram.Client]{Outbox: db, Client: client, Clock: clock, Logger: log})
	if err != nil {
		return nil, err
	}
	log.Info("telegram enabled", "bot", me.Username, "webhook", secret != "")
	tw := &telegramWiring{notifier: notifier, webhook: secret != ""}
	tw.newHandler = func(eng *core.Engine, aps ichat.Decider, rt ichat.RoutineRunner, blobs core.Blobs) (*telegram.Handler, error) {
		return telegram.NewHandler(telegram.HandlerConfig{
			Intake:        ichat.Intake{Blobs: blobs, Engine: eng, Inbox: db, DefaultAgent: tc.DefaultAgent, NodeID: nodeID, Clock: clock, Logger: log},
			WebhookSecret: secret, Outbox: db, Client: client, Approvals: aps, Store: db, Routines: rt,
			Parser: telegram.Parser{BotID: me.ID, BotUsername: me.Username, GroupMode: tc.Mode()}, Chats: tc.Chats,
		})
	}
	tw.services = func(h *telegram.Handler, leases lease.Store) []func(context.Context) error {
		svcs := []func(context.Context) error{h.Start}
		if tw.webhook {
			return svcs
		}
		poller := &telegram.Poller{Client: client, Sink: h, Logger: log}
		return append(svcs, func(ctx context.Context) error {
			lease.Run(ctx, leases, leaseTelegramPoll, nodeID, leaseTTL, log, func(ctx context.Context) {
				if err := poller.Start(ctx); err != nil {
					log.Error("telegram poller stopped", "err", err)
				}
			})
			return nil
		})
	}
	return tw, nil
}
