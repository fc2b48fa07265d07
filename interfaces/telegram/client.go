// Package telegram puts agents into Telegram through the Bot API
// (go-telegram/bot): updates arrive on a webhook (POST /telegram/webhook,
// checked with the secret token) or by long polling, go through the durable
// inbox (update_id dedupes them), and become runs; answers, approval cards
// with inline keyboards and routine results are posted through the outbox.
package telegram

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"golang.org/x/time/rate"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// DefaultAPIURL is the Bot API's base URL.
const DefaultAPIURL = "https://api.telegram.org"

// ErrMaybePosted: the call may have reached Telegram but its answer was lost;
// the message may have been posted.
var ErrMaybePosted = errors.New("telegram: outcome unknown, the message may have been posted")

// ClientConfig configures a Client.
type ClientConfig struct {
	Token string // TELEGRAM_BOT_TOKEN, required
	// APIURL is the Bot API's base URL (TELEGRAM_API_URL); default
	// DefaultAPIURL.
	APIURL string
	// HTTPClient makes the calls; default one with a 60s timeout.
	HTTPClient *http.Client
	// MaxRetries is how often a call Telegram answered 429 is made again,
	// after the retry_after it says. Default 3.
	MaxRetries int
	// NameTimeout bounds the name lookups (getChatMember) of one message
	// (Names); users not named by then show as mentions. Default 2s.
	NameTimeout time.Duration
	// Clock dates the names Names caches. Default the system clock.
	Clock  core.Clock
	Logger *slog.Logger
}

// Client calls the Bot API. Sends and edits are paced per chat within
// Telegram's limits (1 message a second in a chat, 20 a minute in a group),
// and a 429 is retried after its retry_after, every call to that chat
// waiting meanwhile (chat.Pacer).
type Client struct {
	cfg ClientConfig
	bot *bot.Bot
	log *slog.Logger

	pace  *chat.Pacer                  // per chat
	names *chat.Cache[nameKey, string] // what getChatMember said of a user in a chat ("": no name)
	seen  *chat.Cache[nameKey, string] // how updates showed users (chat 0)
}

// NewClient checks cfg and returns the client; it makes no call.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Token == "" {
		return nil, errors.New("telegram: client needs the bot token")
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	cfg.APIURL = strings.TrimRight(cfg.APIURL, "/")
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	// Every URL holds the token (/bot<token>/…): a redirect is not followed,
	// or Go would send it on to wherever it points in the Referer header.
	hc := *cfg.HTTPClient
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.HTTPClient = &hc
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = 3
	}
	if cfg.NameTimeout <= 0 {
		cfg.NameTimeout = 2 * time.Second
	}
	chat.Defaults(&cfg.Clock, &cfg.Logger)
	b, err := bot.New(cfg.Token, bot.WithSkipGetMe(), bot.WithServerURL(cfg.APIURL),
		bot.WithHTTPClient(cfg.HTTPClient.Timeout, cfg.HTTPClient),
		bot.WithErrorsHandler(func(err error) { cfg.Logger.Debug("telegram client", "err", err) }))
	if err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	pace := &chat.Pacer{Platform: "telegram", Logger: cfg.Logger, Retries: cfg.MaxRetries, RetryAfter: tooMany, Limits: limits}
	return &Client{cfg: cfg, bot: b, log: cfg.Logger, pace: pace, names: chat.NewCache[nameKey, string](maxCachedNames),
		seen: chat.NewCache[nameKey, string](maxSeenNames)}, nil
}

// Me returns the bot's own user (getMe).
func (c *Client) Me(ctx context.Context) (*models.User, error) {
	var u *models.User
	err := c.pace.Call(ctx, "", func(ctx context.Context) (err error) { u, err = c.bot.GetMe(ctx); return err })
	return u, err
}

// Send posts text (MarkdownV2) in chat, in a forum topic when thread is
// set, and returns the message id. A refusal returns an error, an unknown
// outcome one wrapping ErrMaybePosted.
func (c *Client) Send(ctx context.Context, chat int64, thread int, text string, markup models.ReplyMarkup) (int, error) {
	var m *models.Message
	err := c.pace.Call(ctx, chatKey(chat), func(ctx context.Context) (err error) {
		m, err = c.bot.SendMessage(ctx, &bot.SendMessageParams{ChatID: chat, MessageThreadID: thread, Text: text,
			ParseMode: models.ParseModeMarkdown, ReplyMarkup: markup})
		return err
	})
	if err != nil {
		if !apiError(err) {
			return 0, fmt.Errorf("%w: %w", ErrMaybePosted, err)
		}
		return 0, err
	}
	return m.ID, nil
}

// Edit replaces the text (MarkdownV2) and inline keyboard of message id in
// chat; markup nil removes the keyboard. "message is not modified" is no
// error.
func (c *Client) Edit(ctx context.Context, chat int64, id int, text string, markup models.ReplyMarkup) error {
	err := c.pace.Call(ctx, chatKey(chat), func(ctx context.Context) error {
		_, err := c.bot.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: chat, MessageID: id, Text: text,
			ParseMode: models.ParseModeMarkdown, ReplyMarkup: markup})
		return err
	})
	if err != nil && strings.Contains(err.Error(), "message is not modified") {
		return nil
	}
	return err
}

// maxCallbackAnswer is the most characters answerCallbackQuery shows.
const maxCallbackAnswer = 200

// AnswerCallback answers a callback query (answerCallbackQuery), showing
// text to the clicker as a notification when set.
func (c *Client) AnswerCallback(ctx context.Context, id, text string) error {
	if r := []rune(text); len(r) > maxCallbackAnswer {
		text = string(r[:maxCallbackAnswer-1]) + "…"
	}
	return c.pace.Call(ctx, "", func(ctx context.Context) error {
		_, err := c.bot.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: id, Text: text})
		return err
	})
}

// ChatMember returns the user that user is in chat (getChatMember): a
// member, or one who left or was banned. Telegram refuses a user who never
// was in chat: "Bad Request: user not found".
func (c *Client) ChatMember(ctx context.Context, chat, user int64) (models.User, error) {
	var m *models.ChatMember
	err := c.pace.Call(ctx, "", func(ctx context.Context) (err error) {
		m, err = c.bot.GetChatMember(ctx, &bot.GetChatMemberParams{ChatID: chat, UserID: user})
		return err
	})
	if err != nil {
		return models.User{}, fmt.Errorf("telegram getChatMember %d in %d: %w", user, chat, err)
	}
	var u *models.User
	switch m.Type {
	case models.ChatMemberTypeOwner:
		u = m.Owner.User
	case models.ChatMemberTypeAdministrator:
		u = &m.Administrator.User
	case models.ChatMemberTypeMember:
		u = m.Member.User
	case models.ChatMemberTypeRestricted:
		u = m.Restricted.User
	case models.ChatMemberTypeLeft:
		u = m.Left.User
	case models.ChatMemberTypeBanned:
		u = m.Banned.User
	}
	if u == nil || u.ID != user {
		return models.User{}, fmt.Errorf("telegram getChatMember %d in %d: the answer names no such user", user, chat)
	}
	return *u, nil
}

// SetCommands registers the bot's commands (setMyCommands). Telegram's
// refusal is an *APIError: its HTTP status and description.
func (c *Client) SetCommands(ctx context.Context, cmds []models.BotCommand) error {
	return c.pace.Call(ctx, "", func(ctx context.Context) error {
		var ok bool
		return c.call(ctx, "setMyCommands", map[string]any{"commands": cmds}, 0, &ok)
	})
}

// Updates long-polls getUpdates for the updates from offset on, waiting up
// to timeout for one. Calling it with offset confirms every update below
// offset: Telegram does not send them again. (go-telegram/bot's own polling
// loop confirms updates before they are stored, so the poller calls this.)
// Telegram's refusal is an *APIError (a 429 one unwraps to a
// *bot.TooManyRequestsError with its retry_after).
func (c *Client) Updates(ctx context.Context, offset int64, timeout time.Duration) ([]models.Update, error) {
	var ups []models.Update
	err := c.call(ctx, "getUpdates", map[string]any{"offset": offset, "timeout": int(timeout / time.Second),
		"allowed_updates": []string{"message", "callback_query"}}, timeout+30*time.Second, &ups)
	return ups, err
}

// APIError is the Bot API's refusal of a call: {"ok":false,"error_code":…,
// "description":…}, with the HTTP status it came with.
type APIError struct {
	Method      string // "setMyCommands"
	Status      int    // HTTP status
	Code        int    // error_code; the HTTP status when the answer has none
	Description string // "Bad Request: command is invalid"
	// RetryAfter is parameters.retry_after of a 429: how long to wait.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	desc := cmp.Or(e.Description, "(no description)")
	if e.Code != e.Status {
		return fmt.Sprintf("telegram %s: HTTP %d: error %d: %s", e.Method, e.Status, e.Code, desc)
	}
	return fmt.Sprintf("telegram %s: HTTP %d: %s", e.Method, e.Status, desc)
}

// Unwrap is go-telegram/bot's error for the same refusal, so that
// errors.Is(err, bot.ErrorBadRequest) and a *bot.TooManyRequestsError hold
// as they do for the calls made through it.
func (e *APIError) Unwrap() error {
	switch e.Code {
	case http.StatusBadRequest:
		return bot.ErrorBadRequest
	case http.StatusUnauthorized:
		return bot.ErrorUnauthorized
	case http.StatusForbidden:
		return bot.ErrorForbidden
	case http.StatusNotFound:
		return bot.ErrorNotFound
	case http.StatusConflict:
		return bot.ErrorConflict
	case http.StatusTooManyRequests:
		return &bot.TooManyRequestsError{Message: e.Description, RetryAfter: int(e.RetryAfter / time.Second)}
	}
	return nil
}

// maxAnswerBytes caps the answer to a call (100 updates of getUpdates fit
// many times); maxErrorBody how much of an answer that is not the Bot API's
// JSON an error quotes.
const (
	maxAnswerBytes = 64 << 20
	maxErrorBody   = 200
)

// call calls method with params (JSON) and decodes its result into result.
// timeout > 0 replaces the HTTP client's. Telegram's refusal is an
// *APIError.
func (c *Client) call(ctx context.Context, method string, params any, timeout time.Duration, result any) error {
	body, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("telegram %s: encode: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.APIURL+"/bot"+c.cfg.Token+"/"+method, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("telegram %s: API URL %q: must be an absolute http(s) URL", method, c.cfg.APIURL) // err quotes the token
	}
	req.Header.Set("Content-Type", "application/json")
	hc := c.cfg.HTTPClient
	if timeout > 0 {
		cp := *hc
		cp.Timeout = timeout
		hc = &cp
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL holds the token
		}
		return fmt.Errorf("telegram %s: %w", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("telegram %s: HTTP %d: read the answer: %w", method, resp.StatusCode, err)
	}
	var r struct {
		OK          bool            `json:"ok"`
		Result      json.RawMessage `json:"result"`
		ErrorCode   int             `json:"error_code"`
		Description string          `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		if resp.StatusCode != http.StatusOK {
			return &APIError{Method: method, Status: resp.StatusCode, Code: resp.StatusCode, Description: excerpt(raw)}
		}
		return fmt.Errorf("telegram %s: decode the answer: %w", method, err)
	}
	if !r.OK {
		e := &APIError{Method: method, Status: resp.StatusCode, Code: r.ErrorCode, Description: r.Description,
			RetryAfter: time.Duration(r.Parameters.RetryAfter) * time.Second}
		if e.Code == 0 {
			e.Code = resp.StatusCode
		}
		return e
	}
	if result != nil {
		if err := json.Unmarshal(r.Result, result); err != nil {
			return fmt.Errorf("telegram %s: decode the result: %w", method, err)
		}
	}
	return nil
}

// excerpt is the start of an answer that is not the Bot API's JSON (a
// proxy's error page), on one line.
func excerpt(raw []byte) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if r := []rune(s); len(r) > maxErrorBody {
		s = string(r[:maxErrorBody]) + "…"
	}
	return s
}

// chatKey is the pacer's key of chat.
func chatKey(chat int64) string { return strconv.FormatInt(chat, 10) }

// limits paces the calls that post in a chat: one a second in any chat,
// and in a group (a negative id) also 20 a minute.
func limits(key string) []*rate.Limiter {
	ls := []*rate.Limiter{rate.NewLimiter(rate.Every(time.Second), 1)}
	if strings.HasPrefix(key, "-") {
		ls = append(ls, rate.NewLimiter(rate.Every(3*time.Second), 20))
	}
	return ls
}

// tooMany reports whether err is Telegram's 429 and its retry_after.
func tooMany(err error) (time.Duration, bool) {
	var tm *bot.TooManyRequestsError
	if !errors.As(err, &tm) {
		return 0, false
	}
	return time.Duration(max(tm.RetryAfter, 1)) * time.Second, true
}

// apiError reports whether err is Telegram's answer (so nothing was done),
// not a transport failure.
func apiError(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) || errors.Is(err, chat.ErrNotSent) {
		return true
	}
	var tm *bot.TooManyRequestsError
	var mg *bot.MigrateError
	for _, e := range []error{bot.ErrorBadRequest, bot.ErrorForbidden, bot.ErrorUnauthorized, bot.ErrorNotFound, bot.ErrorConflict} {
		if errors.Is(err, e) {
			return true
		}
	}
	return errors.As(err, &tm) || errors.As(err, &mg) || strings.Contains(err.Error(), "error response from telegram")
}

// ChatID parses a chat id as bindings and targets hold it. Its error is
// core.Permanent: a job or message naming such a chat is not retried.
func ChatID(s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, core.Permanent(fmt.Errorf("telegram: chat %q: must be a numeric chat id like -1001234567890", s))
	}
	return id, nil
}

// threadID parses a binding's thread (a forum topic's message_thread_id).
func threadID(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
