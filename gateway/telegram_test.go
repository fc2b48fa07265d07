package gateway

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
)

// A webhook secret short enough to guess is refused at start: with it, any
// caller could post forged updates, clicks on approval cards among them.
func TestTelegramWebhookSecretStrength(t *testing.T) {
	cfg := config.Default()
	cfg.Interfaces.Telegram = &config.Telegram{DefaultAgent: "demo"}
	t.Setenv("TELEGRAM_BOT_TOKEN", "123456:ABC")
	t.Setenv("TELEGRAM_API_URL", "http://127.0.0.1:1") // should a secret pass, getMe fails here
	for _, secret := range []string{"abc", "0123456789abcde", "has space 0123456789", strings.Repeat("a", 257)} {
		t.Setenv("TELEGRAM_WEBHOOK_SECRET", secret)
		_, err := newTelegram(t.Context(), cfg, nil, "local", core.SystemClock{}, slog.New(slog.DiscardHandler), nil)
		if ue, ok := err.(*UsageError); !ok || !strings.Contains(ue.Error(), "must be 16-256 characters") {
			t.Errorf("secret %q: newTelegram = %v, want a usage error", secret, err)
		}
	}
}
