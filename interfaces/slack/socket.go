package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// Dispatcher acts on a parsed request and says what to acknowledge it with;
// *Handler is one.
type Dispatcher interface {
	Dispatch(ctx context.Context, req Request) (any, error)
}

var _ Dispatcher = (*Handler)(nil)

// ackTimeout bounds how long an ack waits to be queued for the connection
// (while it reconnects, say). Slack wants it within 3 s and sends the
// envelope again otherwise, so a later ack is of no use.
const ackTimeout = 3 * time.Second

// SocketConfig configures the Socket Mode client.
type SocketConfig struct {
	// AppToken is the app-level token (xapp-…, scope connections:write),
	// from SLACK_APP_TOKEN. Required.
	AppToken string
	// APIURL is the Web API base apps.connections.open is called on, from
	// SLACK_API_URL, as for ClientConfig. Default DefaultAPIURL.
	APIURL string
	// HTTPClient calls apps.connections.open. Default: a client with a 30 s timeout.
	HTTPClient *http.Client
	// Parser reads the envelopes' payloads. Default: the Handler's, when
	// Dispatcher is a *Handler.
	Parser Parser
	// Dispatcher acts on every request before it is acknowledged: the
	// Handler that serves HTTP. Required.
	Dispatcher Dispatcher
	// Logger receives connection and delivery notices. Default: discard.
	Logger *slog.Logger
}

func (c SocketConfig) validate() error {
	switch {
	case !strings.HasPrefix(c.AppToken, "xapp-"):
		return errors.New("slack: socket mode needs an app-level token: set SLACK_APP_TOKEN to the app's xapp-… token (Basic Information → App-Level Tokens, scope connections:write)")
	case c.Dispatcher == nil:
		return errors.New("slack: socket mode needs a dispatcher")
	}
	return ClientConfig{Token: c.AppToken, APIURL: c.APIURL}.validate()
}

// Socket receives events, interactions and slash commands over Socket Mode,
// as the Handler does over HTTP: each envelope is parsed and dispatched (which
// writes it to the inbox), and only then acknowledged, so an envelope the
// gateway could not accept is sent again by Slack. Redeliveries carry the same
// payload, hence the same inbox key, and start no second run.
type Socket struct {
	cfg SocketConfig
	api *slackapi.Client
	log *slog.Logger
}

// NewSocket checks cfg and returns the client; Start connects it.
func NewSocket(cfg SocketConfig) (*Socket, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	chat.Defaults(nil, &cfg.Logger)
	if h, ok := cfg.Dispatcher.(*Handler); ok && cfg.Parser == (Parser{}) {
		cfg.Parser = h.cfg.Parser
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	api := slackapi.New("", slackapi.OptionAppLevelToken(cfg.AppToken),
		slackapi.OptionAPIURL(apiBase(cfg.APIURL)), slackapi.OptionHTTPClient(hc))
	return &Socket{cfg: cfg, api: api, log: cfg.Logger}, nil
}

// Start connects to Slack and serves envelopes until ctx ends, then returns
// nil. It reconnects (with a URL from apps.connections.open each time) when
// Slack asks it to or the connection drops, backing off while connecting
// fails; it returns an error only when Slack refuses the app token.
func (s *Socket) Start(ctx context.Context) error {
	client := socketmode.New(s.api)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var runErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		defer cancel()
		runErr = client.RunContext(runCtx)
	})
	for {
		select {
		case <-runCtx.Done():
			wg.Wait()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack socket mode stopped: %w (check SLACK_APP_TOKEN: the app's xapp-… token, scope connections:write)", runErr)
		case evt := <-client.Events:
			s.event(runCtx, client, evt)
		}
	}
}

// event acts on one event of the socketmode client.
func (s *Socket) event(ctx context.Context, client *socketmode.Client, evt socketmode.Event) {
	switch evt.Type {
	case socketmode.EventTypeEventsAPI, socketmode.EventTypeInteractive, socketmode.EventTypeSlashCommand:
		s.envelope(ctx, client, *evt.Request)
	case socketmode.EventTypeErrorBadMessage:
		// socketmode could not decode the payload into its own types (an
		// event type it does not know, say); the Parser may still read it.
		var req socketmode.Request
		if bad, ok := evt.Data.(*socketmode.ErrorBadMessage); ok && json.Unmarshal(bad.Message, &req) == nil && req.EnvelopeID != "" {
			s.log.Debug("slack socket envelope slack-go could not decode", "err", bad.Cause)
			s.envelope(ctx, client, req)
			return
		}
		s.log.Warn("slack socket message unreadable", "err", evt.Data)
	case socketmode.EventTypeConnected:
		s.log.Info("slack socket mode connected")
	case socketmode.EventTypeConnectionError:
		s.log.Warn("slack socket mode connection failed; retrying", "err", evt.Data)
	case socketmode.EventTypeIncomingError, socketmode.EventTypeErrorWriteFailed:
		s.log.Warn("slack socket mode", "event", evt.Type, "err", evt.Data)
	default: // connecting, hello, invalid_auth (Start returns it)
		s.log.Debug("slack socket mode", "event", evt.Type)
	}
}

// envelope parses and dispatches one envelope, then acknowledges it, with
// the payload Dispatch returned. A Dispatch error leaves it unacknowledged,
// for Slack to send again.
func (s *Socket) envelope(ctx context.Context, client *socketmode.Client, env socketmode.Request) {
	log := s.log.With("envelope", env.EnvelopeID, "type", env.Type, "retry", env.RetryAttempt)
	req, err := s.parse(env)
	var ack any
	if err != nil {
		// Sent again it would fail again: acknowledge and drop it.
		log.Warn("slack socket envelope malformed", "err", err)
	} else if ack, err = s.cfg.Dispatcher.Dispatch(ctx, req); err != nil {
		if ctx.Err() == nil { // else shutting down
			log.Error("slack socket envelope not accepted; Slack will send it again", "kind", req.Kind, "key", req.DedupeKey, "err", err)
		}
		return
	}
	ackCtx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	err = client.AckCtx(ackCtx, env.EnvelopeID, ack)
	if err != nil && ack != nil && ackCtx.Err() == nil {
		// The answer is too large for an ack; the request is accepted all the same.
		log.Warn("slack socket ack payload dropped", "err", err)
		err = client.AckCtx(ackCtx, env.EnvelopeID, nil)
	}
	if err != nil {
		log.Warn("slack socket ack not sent; Slack will send the envelope again", "err", err)
	}
}

// parse reads an envelope's payload with the parser of its type.
func (s *Socket) parse(env socketmode.Request) (Request, error) {
	switch env.Type {
	case socketmode.RequestTypeEventsAPI:
		return s.cfg.Parser.ParseEvent(env.Payload)
	case socketmode.RequestTypeInteractive:
		return s.cfg.Parser.ParseInteraction(env.Payload)
	case socketmode.RequestTypeSlashCommands:
		return s.cfg.Parser.ParseCommandJSON(env.Payload)
	}
	return Request{Kind: KindIgnored, Ignored: "envelope " + env.Type}, nil
}
