package gateway

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
)

func TestSlackNeedsCredentials(t *testing.T) {
	cfg := config.Default()
	cfg.Interfaces.Slack = &config.Slack{DefaultAgent: "demo"}
	for _, tc := range []struct{ secret, token, app, want string }{
		{"", "xoxb-1", "", "neither SLACK_SIGNING_SECRET"},
		{"s3cret", "", "", "SLACK_BOT_TOKEN is not set"},
		{"s3cret", "xoxb-1", "xoxb-2", "SLACK_APP_TOKEN: must be the app-level token, xapp-"},
	} {
		t.Setenv("SLACK_SIGNING_SECRET", tc.secret)
		t.Setenv("SLACK_BOT_TOKEN", tc.token)
		t.Setenv("SLACK_APP_TOKEN", tc.app)
		_, err := newSlack(t.Context(), cfg, nil, "local", core.SystemClock{}, slog.New(slog.DiscardHandler), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("newSlack = %v, want an error saying %q", err, tc.want)
		}
	}
	cfg.Interfaces.Slack = nil
	if sw, err := newSlack(t.Context(), cfg, nil, "local", core.SystemClock{}, slog.New(slog.DiscardHandler), nil); sw != nil || err != nil {
		t.Errorf("without interfaces.slack: %v, %v; want nothing", sw, err)
	}
}

func TestSlackConfigValidation(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte("agents:\n  demo:\n    model: {provider: demo}\ninterfaces:\n  slack:\n    default_agent: nope\n    channels: {general: demo}\n"),
		func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), `interfaces.slack.default_agent: no agent "nope"`) ||
		!strings.Contains(err.Error(), "interfaces.slack.channels.general: must be a Slack channel id") {
		t.Errorf("Parse = %v", err)
	}
}
