package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
	"github.com/agentgate/agentgate/interfaces/slack"
)

// slackWiring is the Slack interface, when configured: the events handler
// and the replier whose finish hook and job handler the engine runs.
type slackWiring struct {
	replier *slack.Replier
	// notifier posts approval cards and routine results.
	notifier *slack.Notifier
	// handler is built once the engine exists (it submits runs to it).
	newHandler func(eng *core.Engine, aps slack.Decider, rt slack.RoutineRunner) (http.Handler, error)
}

// newSlack builds the Slack interface from interfaces.slack and the
// SLACK_* environment; nil when interfaces.slack is not configured.
func newSlack(ctx context.Context, cfg *config.Config, db storeDB, clock core.Clock, log *slog.Logger) (*slackWiring, error) {
	sc := cfg.Interfaces.Slack
	if sc == nil {
		return nil, nil
	}
	secret, token := os.Getenv("SLACK_SIGNING_SECRET"), os.Getenv("SLACK_BOT_TOKEN")
	for _, v := range []struct{ name, val, what string }{
		{"SLACK_SIGNING_SECRET", secret, "the app's signing secret (Basic Information → App Credentials)"},
		{"SLACK_BOT_TOKEN", token, "the app's bot token, xoxb-… (OAuth & Permissions)"},
	} {
		if v.val == "" {
			return nil, &usageError{fmt.Sprintf("interfaces.slack is configured but %s is not set: set it to %s", v.name, v.what)}
		}
	}
	client, err := slack.NewClient(slack.ClientConfig{Token: token, APIURL: os.Getenv("SLACK_API_URL"), Logger: log})
	if err != nil {
		return nil, err
	}
	who, err := client.AuthTest(ctx)
	if err != nil {
		return nil, fmt.Errorf("slack: check the bot token: %w", err)
	}
	rep, err := slack.NewReplier(slack.ReplierConfig{Store: db, Client: client, Clock: clock, Logger: log})
	if err != nil {
		return nil, err
	}
	notifier, err := slack.NewNotifier(slack.NotifierConfig{Store: db, Client: client, Clock: clock, Logger: log})
	if err != nil {
		return nil, err
	}
	log.Info("slack enabled", "team", who.TeamID, "bot_user", who.UserID)
	return &slackWiring{replier: rep, notifier: notifier, newHandler: func(eng *core.Engine, aps slack.Decider, rt slack.RoutineRunner) (http.Handler, error) {
		return slack.NewHandler(slack.HandlerConfig{
			Interact:      slack.InteractConfig{Approvals: aps, Store: db, Client: client, Routines: rt, Command: sc.CommandName()},
			SigningSecret: secret, Engine: eng, Sessions: db, Logger: log,
			Parser:       slack.Parser{BotUserID: who.UserID, BotID: who.BotID},
			DefaultAgent: sc.DefaultAgent, Channels: sc.Channels,
			ThreadFollowUps: sc.ThreadFollowUps(), IgnoreBots: sc.IgnoresBots(),
		})
	}}, nil
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
