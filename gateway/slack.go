package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
	ichat "github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/slack"
)

// slackWiring is the Slack interface, when configured: the events handler
// and the notifier.
type slackWiring struct {
	// notifier posts answers, approval cards and routine results.
	notifier *slack.Notifier
	// handler is built once the engine exists (it submits runs to it); its
	// Start runs the inbox writer and processor.
	newHandler func(eng *core.Engine, aps ichat.Decider, rt ichat.RoutineRunner, blobs core.Blobs) (*slack.Handler, error)
	// socket, set when SLACK_APP_TOKEN is, receives events, clicks and slash
	// commands over Socket Mode into the handler that serves /slack/events,
	// until ctx ends; Start runs it beside the HTTP server.
	socket func(ctx context.Context, h *slack.Handler) error
}

// newSlack builds the Slack interface from interfaces.slack and the
// SLACK_* environment; nil when interfaces.slack is not configured.
func newSlack(ctx context.Context, cfg *config.Config, db storeDB, nodeID string, clock core.Clock, log *slog.Logger, api ichat.APIObserver) (*slackWiring, error) {
	sc := cfg.Interfaces.Slack
	if sc == nil {
		return nil, nil
	}
	secret, token, appToken := os.Getenv("SLACK_SIGNING_SECRET"), os.Getenv("SLACK_BOT_TOKEN"), os.Getenv("SLACK_APP_TOKEN")
	switch {
	case token == "":
		return nil, &UsageError{"interfaces.slack is configured but SLACK_BOT_TOKEN is not set: set it to the app's bot token, xoxb-… (OAuth & Permissions)"}
	case appToken != "" && !strings.HasPrefix(appToken, "xapp-"):
		return nil, &UsageError{"SLACK_APP_TOKEN: must be the app-level token, xapp-… (Basic Information → App-Level Tokens, " +
			"scope connections:write); unset it to receive events over HTTP at /slack/events"}
	case secret == "" && appToken == "":
		return nil, &UsageError{"interfaces.slack is configured but neither SLACK_SIGNING_SECRET (events over HTTP at /slack/events: " +
			"the app's signing secret, Basic Information → App Credentials) nor SLACK_APP_TOKEN (Socket Mode: xapp-…) is set"}
	}
	client, err := slack.NewClient(slack.ClientConfig{Token: token, APIURL: os.Getenv("SLACK_API_URL"), Logger: log,
		HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: ichat.Counted(ichat.PlatformSlack, nil, api)}})
	if err != nil {
		return nil, err
	}
	who, err := client.AuthTest(ctx)
	if err != nil {
		return nil, fmt.Errorf("slack: check the bot token: %w", err)
	}
	notifier, err := slack.NewNotifier(ichat.NotifierConfig[*slack.Client]{Outbox: db, Client: client, Clock: clock, Logger: log})
	if err != nil {
		return nil, err
	}
	log.Info("slack enabled", "team", who.TeamID, "bot_user", who.UserID, "socket_mode", appToken != "")
	sw := &slackWiring{notifier: notifier, newHandler: func(eng *core.Engine, aps ichat.Decider, rt ichat.RoutineRunner, blobs core.Blobs) (*slack.Handler, error) {
		return slack.NewHandler(slack.HandlerConfig{
			Threads:       ichat.Threads{Sessions: db, Channels: sc.Channels, ThreadFollowUps: sc.ThreadFollowUps(), IgnoreBots: sc.IgnoresBots()},
			Intake:        ichat.Intake{Blobs: blobs, Engine: eng, Logger: log, Inbox: db, NodeID: nodeID, DefaultAgent: sc.DefaultAgent},
			Interact:      slack.InteractConfig{Approvals: aps, Store: db, Client: client, Routines: rt, Command: sc.CommandName()},
			SigningSecret: secret,
			Parser:        slack.Parser{BotUserID: who.UserID, BotID: who.BotID},
		})
	}}
	if appToken != "" {
		sw.socket = func(ctx context.Context, h *slack.Handler) error {
			sock, err := slack.NewSocket(slack.SocketConfig{AppToken: appToken, APIURL: os.Getenv("SLACK_API_URL"), Dispatcher: h, Logger: log})
			if err != nil {
				return err
			}
			return sock.Start(ctx)
		}
	}
	return sw, nil
}

// finishHooks calls every hook and concatenates their jobs.
func finishHooks(hooks ...func(core.Run, core.RunStatus) []core.Job) func(core.Run, core.RunStatus) []core.Job {
	return func(run core.Run, status core.RunStatus) []core.Job {
		var jobs []core.Job
		for _, h := range hooks {
			jobs = append(jobs, h(run, status)...)
		}
		return jobs
	}
}
