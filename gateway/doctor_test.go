package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/gateway"
	"github.com/agentgate/agentgate/interfaces/slack/slacktest"
	"github.com/agentgate/agentgate/interfaces/telegram/telegramtest"
)

// status returns the checks as "name=status" lines, and the first check
// called name.
func status(checks []gateway.Check, name string) (string, gateway.Check) {
	var lines []string
	var found gateway.Check
	for _, c := range checks {
		lines = append(lines, c.Name+"="+c.Status)
		if c.Name == name && found.Name == "" {
			found = c
		}
	}
	return strings.Join(lines, " "), found
}

// Doctor against fake Slack and Telegram APIs: all green; a wrong Slack
// token or a stopped Redis is one failing line that says what to do.
func TestDoctor(t *testing.T) {
	sl := slacktest.New(t)
	const tgToken = "123456:doctor-test-token"
	tg := telegramtest.New(tgToken)
	t.Cleanup(tg.Close)
	s := settings(t)
	cfg := "agents:\n  demo:\n    model: {provider: demo}\ninterfaces:\n  slack: {default_agent: demo}\n  telegram: {default_agent: demo}\n"
	if err := os.WriteFile(s.ConfigPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLACK_BOT_TOKEN", sl.Token)
	t.Setenv("SLACK_API_URL", sl.APIURL())
	t.Setenv("TELEGRAM_BOT_TOKEN", tgToken)
	t.Setenv("TELEGRAM_API_URL", tg.URL)

	checks := gateway.Doctor(t.Context(), s)
	all, _ := status(checks, "")
	if all != "config=ok slack token=ok telegram token=ok data dir=ok" {
		t.Fatalf("checks before the first start = %s; want all green\n%+v", all, checks)
	}
	if _, _, err := gateway.Migrate(t.Context(), s, -1, nil); err != nil {
		t.Fatal(err)
	}
	checks = gateway.Doctor(t.Context(), s)
	if all, _ = status(checks, ""); all != "config=ok slack token=ok telegram token=ok data dir=ok schema=ok" {
		t.Fatalf("checks after a start = %s; want all green\n%+v", all, checks)
	}

	t.Setenv("SLACK_BOT_TOKEN", "xoxb-revoked")
	all, c := status(gateway.Doctor(t.Context(), s), "slack token")
	if c.Status != gateway.CheckFail || !strings.Contains(c.Detail, "invalid_auth") || !strings.Contains(c.Fix, "set SLACK_BOT_TOKEN to the app's bot token") {
		t.Fatalf("with a wrong Slack token: %s\n%+v", all, c)
	}
	t.Setenv("SLACK_BOT_TOKEN", sl.Token)

	s.DatabaseURL = os.Getenv("AGENTGATE_TEST_DATABASE_URL")
	if s.DatabaseURL == "" {
		t.Log("AGENTGATE_TEST_DATABASE_URL not set: the Redis case is checked without PostgreSQL")
	}
	s.RedisURL = "redis://127.0.0.1:1/0" // nothing listens there: a stopped Redis
	all, c = status(gateway.Doctor(t.Context(), s), "redis")
	if c.Status != gateway.CheckFail || c.Fix != "start Redis or fix AGENTGATE_REDIS_URL" {
		t.Fatalf("with Redis stopped: %s\n%+v", all, c)
	}

	// A data dir a running gateway holds is fine; one that is not writable is not.
	s = settings(t)
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.MkdirAll(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	s.DataDir = ro
	if os.Geteuid() != 0 { // root writes anywhere
		all, c = status(gateway.Doctor(t.Context(), s), "data dir")
		if c.Status != gateway.CheckFail || !strings.Contains(c.Detail, "not writable") {
			t.Fatalf("with a read-only data dir: %s\n%+v", all, c)
		}
	}
}

// TestDoctorHidesURLPasswords: a database or Redis URL doctor cannot parse
// is named, not quoted: the parsers' errors quote it with its password
// (pgx redacts only what it can recognise).
func TestDoctorHidesURLPasswords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, check, databaseURL, redisURL string
	}{
		{name: "redis", check: "redis", redisURL: "redis://:S3cr%zzetPW@cache:6379/0"},
		{name: "postgres dsn", check: "database", databaseURL: "host=db user=ag password='Top Secret pw"},
		{name: "postgres url", check: "database", databaseURL: "postgres://ag:S3cr%zzet@db:5432/ag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := settings(t)
			s.DatabaseURL, s.RedisURL = tt.databaseURL, tt.redisURL
			checks := gateway.Doctor(t.Context(), s)
			all, c := status(checks, tt.check)
			if c.Status != gateway.CheckFail || !strings.Contains(c.Detail, "not a valid") {
				t.Errorf("%s check: %s\n%+v; want a failure saying the URL is not valid", tt.check, all, c)
			}
			for _, c := range checks {
				line := c.Detail + " " + c.Fix
				if strings.Contains(line, "S3cr") || strings.Contains(line, "Secret") {
					t.Errorf("check %s shows the password: %s", c.Name, line)
				}
			}
		})
	}
}
