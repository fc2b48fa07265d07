package telegram_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/go-telegram/bot"

	"github.com/agentgate/agentgate/interfaces/telegram"
	"github.com/agentgate/agentgate/interfaces/telegram/telegramtest"
)

// A refused setMyCommands is an error that says what Telegram said: the
// HTTP status and the description, in the log line too; it is still a Bad
// Request to errors.Is.
func TestSetCommandsRefusal(t *testing.T) {
	t.Parallel()
	fake, c := newClient(t)
	fake.Refuse("setMyCommands", 1, telegramtest.Refusal{Code: http.StatusBadRequest, Description: "Bad Request: command is invalid"})
	err := c.SetCommands(t.Context(), telegram.Commands)
	if err == nil {
		t.Fatal("SetCommands = nil, want Telegram's refusal")
	}
	var ae *telegram.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Description != "Bad Request: command is invalid" {
		t.Fatalf("err = %#v, want an *APIError with HTTP 400 and Telegram's description", err)
	}
	if !errors.Is(err, bot.ErrorBadRequest) {
		t.Errorf("errors.Is(%v, bot.ErrorBadRequest) = false", err)
	}
	var line bytes.Buffer
	slog.New(slog.NewTextHandler(&line, nil)).Warn("telegram: could not register the bot's commands (setMyCommands)", "err", err)
	for _, want := range []string{"400", "Bad Request: command is invalid", "setMyCommands"} {
		if !strings.Contains(line.String(), want) {
			t.Errorf("log line %q lacks %q", line.String(), want)
		}
	}
	if strings.Contains(line.String(), token) {
		t.Errorf("log line %q holds the bot token", line.String())
	}
	// The commands go through once Telegram takes them.
	if err := c.SetCommands(t.Context(), telegram.Commands); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fake.Commands(), `"command":"help"`) {
		t.Fatalf("setMyCommands = %s, want the commands", fake.Commands())
	}
}

// A 429 of setMyCommands is retried after its retry_after, as other calls.
func TestSetCommandsRetriesAfter429(t *testing.T) {
	t.Parallel()
	fake, c := newClient(t)
	fake.Fail429("setMyCommands", 1)
	if err := c.SetCommands(t.Context(), telegram.Commands); err != nil {
		t.Fatal(err)
	}
	if n := fake.Calls("setMyCommands"); n != 2 {
		t.Fatalf("setMyCommands calls = %d, want 2 (one refused, one after retry_after)", n)
	}
}
