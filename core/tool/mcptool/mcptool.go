// Package mcptool makes the tools of an MCP server agent tools: a local
// server started as a process that speaks MCP on its stdin and stdout, or a
// remote one reached over streamable HTTP. It uses the mark3labs/mcp-go
// client.
//
// Lifecycle. New only validates. The server is started (or connected to) by
// the first Tools or tool call, once: concurrent first calls share one
// start, bounded by Config.Timeout (30s when unset). The start includes the
// MCP handshake and a first tools/list. When the process exits or the HTTP
// connection or session is lost, the next call starts it again; after a
// start that failed, calls fail at once with that error until a backoff
// (1s, doubling to 30s) has passed. Close stops it for good.
//
// Outcomes of a tool call, as the engine treats them:
//
//   - a result: its text content joined with newlines (see CallFiles for
//     images, resources and structured content).
//   - a result with isError set: a *core.ToolError with its text; the model
//     is told.
//   - an error answer of the server (a JSON-RPC error such as unknown tool
//     or invalid arguments), a result that cannot be read, or one over
//     MaxMessageBytes: a *core.ToolError too: the server answered, so
//     retrying would not help. (Over stdio, a message over the limit stops
//     the process; the calls waiting on it get this error.)
//   - a transport failure (the process died, the connection or session was
//     lost, the call timed out or was cancelled): a plain error. The engine
//     retries the call with the same idempotency key, which every call
//     carries in its request's _meta as "agentgate/idempotency_key"
//     (IdempotencyKeyMeta); a server that acts on the world should treat a
//     repeated key as the same request.
//
// Tool names are filtered by Config.Allow and Config.Deny: a tool that is
// not allowed is neither listed nor callable.
//
// Headers may carry credentials: they are never logged nor put in errors,
// and URLs in errors and logs lose their query string and user info.
package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/tool/httptool"
)

// IdempotencyKeyMeta is the key under which a tool call's idempotency key
// is sent in the tools/call request's params._meta.
const IdempotencyKeyMeta = "agentgate/idempotency_key"

// Defaults.
const (
	// DefaultTimeout bounds one tool call or tools listing.
	DefaultTimeout = 60 * time.Second
	// DefaultStartTimeout bounds starting the server, the MCP handshake
	// and the first tools/list, when Config.Timeout is not set.
	DefaultStartTimeout = 30 * time.Second

	minBackoff = time.Second
	maxBackoff = 30 * time.Second
	// stderrTail is how much of a process's latest stderr output is kept
	// for errors and logs.
	stderrTail = 2 << 10
)

// Log keys.
const (
	logServer   = "mcp_server"
	logPID      = "pid"
	logURL      = "url"
	logTools    = "tools"
	logRestarts = "restarts"
	logErr      = "err"
	logExit     = "exit"
	logStderr   = "stderr"
	logRetry    = "retry_in"
)

// ErrClosed is returned (wrapped) by calls on a closed Server.
var ErrClosed = errors.New("closed")

// Config configures one MCP server. Set Command or URL, not both.
type Config struct {
	// Name is the server's name in the config, used in errors and logs.
	// Required.
	Name string

	// Command starts a server that speaks MCP on its stdin and stdout, with
	// Args, in Dir (default: the gateway's working directory). Its
	// environment is minimal: PATH and HOME from the gateway's environment,
	// then Env (which may override them); nothing else is inherited.
	Command string
	Args    []string
	Env     map[string]string
	Dir     string

	// URL is the endpoint of a server reached over streamable HTTP, an
	// absolute http or https URL. Headers are sent with every request
	// (e.g. Authorization); they are never logged.
	URL     string
	Headers map[string]string

	// Allow lists the tools agents may use, as globs ("get_*", core.MatchTool);
	// empty means all. Deny removes tools from that and wins.
	Allow, Deny []string

	// Timeout bounds one tool call or tools listing. Default 60s. When set,
	// it also bounds a start (process or connection, handshake and first
	// listing), which is otherwise bounded by 30s.
	Timeout time.Duration

	// Logger receives the server's starts and stops, tagged with
	// mcp_server=Name. Default: discard.
	Logger *slog.Logger
}

// LogValue implements slog.LogValuer: the command or the URL without its
// query string, and header names with redacted values.
func (c Config) LogValue() slog.Value {
	if c.URL != "" {
		names := slices.Sorted(maps.Keys(c.Headers))
		return slog.GroupValue(
			slog.String("name", c.Name),
			slog.String("url", safeURL(c.URL)),
			slog.String("headers", strings.Join(names, ",")+" (values redacted)"),
		)
	}
	return slog.GroupValue(
		slog.String("name", c.Name),
		slog.String("command", c.Command),
		slog.Any("args", c.Args),
		slog.String("env", strings.Join(slices.Sorted(maps.Keys(c.Env)), ",")+" (values redacted)"),
	)
}

func (c Config) validate() error {
	if c.Name == "" {
		return errors.New("name: required")
	}
	switch {
	case c.Command == "" && c.URL == "":
		return errors.New("set command (a local server) or url (a remote one)")
	case c.Command != "" && c.URL != "":
		return errors.New("set command or url, not both")
	}
	if c.Command != "" {
		if len(c.Headers) > 0 {
			return errors.New("headers: only for a server with a url; a command gets env")
		}
		for k := range c.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return fmt.Errorf("env: %q is not a valid variable name", k)
			}
		}
	} else {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("url: must be an absolute http(s) URL")
		}
		if len(c.Args) > 0 || len(c.Env) > 0 || c.Dir != "" {
			return errors.New("args, env and dir: only for a server with a command")
		}
		for name, value := range c.Headers {
			if !httptool.ValidHeaderName(name) {
				return fmt.Errorf("headers: %q is not a valid header name", name)
			}
			if strings.ContainsAny(value, "\r\n\x00") {
				// Do not quote the value: it may be a secret.
				return fmt.Errorf("headers: value of %s contains a line break or NUL", name)
			}
		}
	}
	for field, patterns := range map[string][]string{"allow": c.Allow, "deny": c.Deny} {
		for i, p := range patterns {
			if _, err := path.Match(p, ""); err != nil {
				return fmt.Errorf("%s[%d]: %q is not a valid pattern (globs like get_* or *): %v", field, i, p, err)
			}
		}
	}
	if c.Timeout < 0 {
		return errors.New("timeout: must not be negative (0 means 60s)")
	}
	return nil
}

// ToolInfo describes one tool of the server.
type ToolInfo struct {
	Name        string
	Description string
	// Parameters is the tool's input JSON Schema, as mcp-go reads it: type,
	// properties, required, additionalProperties and $defs.
	Parameters json.RawMessage
	// ReadOnly is the readOnlyHint annotation. Destructive follows the MCP
	// default: a tool that is not read-only is destructive unless its
	// destructiveHint is false.
	ReadOnly, Destructive bool
}

// Server is one MCP server, started on first use. It is safe for
// concurrent use.
type Server struct {
	name         string
	cfg          Config
	env          []string
	timeout      time.Duration
	startTimeout time.Duration
	log          *slog.Logger
	maxMessage   int64 // MaxMessageBytes; tests make it small

	life context.Context // ends at Close
	stop context.CancelFunc
	wg   sync.WaitGroup // starts and closing sessions

	mu       sync.Mutex
	closed   bool
	sess     *session
	starting *attempt  // the start in progress
	lastErr  error     // of the last start, if it failed
	failures int       // failed starts in a row
	retryAt  time.Time // no start before, after a failed one
	started  int       // successful starts
}

// New validates cfg and returns the server, not started. Errors name the
// field at fault, e.g. "url: must be an absolute http(s) URL", for the
// caller to prefix with where the server was configured.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		name:         cfg.Name,
		cfg:          cfg,
		timeout:      cfg.Timeout,
		startTimeout: cfg.Timeout,
		log:          cfg.Logger,
		maxMessage:   MaxMessageBytes,
	}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
		s.startTimeout = DefaultStartTimeout
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With(logServer, cfg.Name)
	if cfg.Command != "" {
		s.env = minimalEnv(cfg.Env)
	}
	s.life, s.stop = context.WithCancel(context.Background())
	return s, nil
}

// minimalEnv is PATH and HOME of this process, then extra (sorted).
func minimalEnv(extra map[string]string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// Tools returns the server's allowed tools, starting the server if it is
// not running. The list is cached; it is listed again after the server
// sends notifications/tools/list_changed and after a restart.
func (s *Server) Tools(ctx context.Context) ([]ToolInfo, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, errTimeout)
	defer cancel()
	sess, err := s.session(ctx)
	if err != nil {
		return nil, s.waitError(ctx, "list tools", err)
	}
	tools, err := sess.list(ctx, s.allowed)
	if err != nil {
		err, _ = s.requestError(ctx, sess, "list tools", err)
		return nil, err
	}
	return slices.Clone(tools), nil
}

// Tool returns the callable tool name of the server. Whether it is allowed
// is checked at each call.
func (s *Server) Tool(name string) core.FileTool { return &tool{s: s, name: name} }

// Close stops the server process or ends the HTTP session, and waits for
// the starts and stops in progress. Later calls fail with ErrClosed.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	sess := s.sess
	s.sess = nil
	s.mu.Unlock()
	s.stop()
	var err error
	if sess != nil {
		err = sess.close()
		s.log.Info("mcp server stopped")
	}
	s.wg.Wait()
	if err != nil {
		return fmt.Errorf("mcp server %q: close: %w", s.name, err)
	}
	return nil
}

func (s *Server) allowed(name string) bool {
	ok := len(s.cfg.Allow) == 0
	for _, p := range s.cfg.Allow {
		if core.MatchTool(p, name) {
			ok = true
			break
		}
	}
	for _, p := range s.cfg.Deny {
		if core.MatchTool(p, name) {
			return false
		}
	}
	return ok
}

// attempt is one start, shared by the calls that wait for it.
type attempt struct {
	done chan struct{}
	sess *session
	err  error
}

// session returns the running session, starting one if there is none.
func (s *Server) session(ctx context.Context) (*session, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("mcp server %q: %w", s.name, ErrClosed)
	}
	if s.sess != nil {
		sess := s.sess
		s.mu.Unlock()
		return sess, nil
	}
	a := s.starting
	if a == nil {
		if wait := time.Until(s.retryAt); s.lastErr != nil && wait > 0 {
			err := s.lastErr
			s.mu.Unlock()
			return nil, fmt.Errorf("%w (next start attempt in %s)", err, wait.Round(100*time.Millisecond))
		}
		a = &attempt{done: make(chan struct{})}
		s.starting = a
		s.wg.Add(1)
		go s.start(a)
	}
	s.mu.Unlock()
	select {
	case <-a.done:
		return a.sess, a.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// start runs one attempt, detached from the callers that wait for it.
func (s *Server) start(a *attempt) {
	defer s.wg.Done()
	defer close(a.done)
	ctx, cancel := context.WithTimeout(s.life, s.startTimeout)
	defer cancel()

	s.mu.Lock()
	restarts := s.started
	s.mu.Unlock()
	if restarts > 0 {
		s.log.Warn("restarting mcp server", logRestarts, restarts)
	}
	sess, err := s.connect(ctx)

	s.mu.Lock()
	s.starting = nil
	if err == nil && s.closed {
		err = fmt.Errorf("mcp server %q: %w", s.name, ErrClosed)
		s.mu.Unlock()
		_ = sess.close()
		s.mu.Lock()
	}
	if err != nil {
		s.failures++
		backoff := min(minBackoff<<(s.failures-1), maxBackoff)
		s.lastErr, s.retryAt = err, time.Now().Add(backoff)
		s.mu.Unlock()
		if !errors.Is(err, ErrClosed) {
			s.log.Warn("mcp server failed to start", logErr, err, logRetry, backoff)
		}
		a.err = err
		return
	}
	s.failures, s.lastErr, s.retryAt = 0, nil, time.Time{}
	s.started++
	s.sess = sess
	s.mu.Unlock()
	a.sess = sess
	if sess.pid != 0 {
		s.log.Info("mcp server started", logPID, sess.pid, logTools, len(sess.tools), logRestarts, restarts)
	} else {
		s.log.Info("mcp server connected", logURL, safeURL(s.cfg.URL), logTools, len(sess.tools), logRestarts, restarts)
	}
}

// connect starts the process or opens the connection, initializes and
// lists the tools.
func (s *Server) connect(ctx context.Context) (*session, error) {
	sess := &session{sem: make(chan struct{}, 1)}
	var tr transport.Interface
	if s.cfg.Command != "" {
		sess.stderr = &tail{max: stderrTail}
		// Not CommandContext: stopping closes stdin, then signals.
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		cmd.Env = s.env
		cmd.Dir = s.cfg.Dir
		cmd.Stderr = sess.stderr
		cmd.WaitDelay = time.Second // a grandchild holding stderr open
		stdio, proc, err := startStdio(cmd, s.maxMessage, func() {
			sess.tooLarge.Store(true)
			s.lost(sess, fmt.Errorf("%w: a message over %s", errTooLarge, core.ByteSize(s.maxMessage)))
		}, s.log)
		if err != nil {
			return nil, s.startError("start", err, sess)
		}
		sess.proc, sess.pid, tr = proc, cmd.Process.Pid, stdio
	} else {
		var err error
		// Each message's bytes are bounded, as over stdio.
		tr, err = transport.NewStreamableHTTP(s.cfg.URL,
			transport.WithHTTPBasicClient(&http.Client{Transport: &limitTransport{next: http.DefaultTransport, max: s.maxMessage}}),
			transport.WithHTTPHeaders(maps.Clone(s.cfg.Headers)),
			transport.WithHTTPLogger(s.log))
		if err != nil {
			return nil, s.startError("connect", err, nil)
		}
	}
	sess.c = client.NewClient(tr)
	sess.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationToolsListChanged {
			sess.changes.Add(1)
			s.log.Debug("mcp server tools changed")
		}
	})
	// Start's context is the session's: the stdio transport keeps it for
	// the server's requests to the client.
	fail := func(step string, err error) (*session, error) {
		if cerr := context.Cause(ctx); cerr != nil && errors.Is(cerr, context.DeadlineExceeded) {
			err = fmt.Errorf("timed out after %s: %w", s.startTimeout, err)
		}
		if sess.tooLarge.Load() {
			err = fmt.Errorf("%w: it sent a message over %s", err, core.ByteSize(s.maxMessage))
		}
		// Close waits for the process, so its stderr is all there.
		if exit := sess.close(); exit != nil && sess.pid != 0 {
			err = fmt.Errorf("%w (process: %v)", err, exit)
		}
		return nil, s.startError(step, err, sess)
	}
	if err := sess.c.Start(s.life); err != nil {
		return fail("start", err)
	}
	_, err := sess.c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "agentgate", Version: version()},
	}})
	if err != nil {
		return fail("initialize", err)
	}
	if caps := sess.c.GetServerCapabilities().Tools; caps != nil && caps.ListChanged && mcp.IsModernProtocol(sess.c.ProtocolVersion()) {
		// From protocol 2026-07-28 notifications are opt-in.
		stop, err := sess.c.ListenAsync(s.life, mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) {
			s.log.Debug("mcp server notification stream ended", logErr, err)
		})
		if err == nil {
			sess.stopListen = stop
		}
	}
	if _, err := sess.list(ctx, s.allowed); err != nil {
		return fail("list tools", err)
	}
	return sess, nil
}

// startError says which server failed to start and how: the command or
// URL, and the end of the process's stderr.
func (s *Server) startError(step string, err error, sess *session) error {
	where := fmt.Sprintf("command %q", s.cfg.Command)
	if s.cfg.URL != "" {
		where = "url " + safeURL(s.cfg.URL)
		err = stripURLError(err)
	}
	msg := fmt.Sprintf("mcp server %q (%s): %s: %%w", s.name, where, step)
	if sess != nil && sess.pid != 0 {
		if tail := sess.stderr.String(); tail != "" {
			msg += "; stderr: " + tail
		} else {
			msg += " (no stderr output)"
		}
	}
	return fmt.Errorf(msg, err)
}

// waitError words a failure to get a running session.
func (s *Server) waitError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return s.ctxError(ctx, op)
	}
	return err
}

// ctxError words the end of a call's context: its own timeout or the
// caller's cancellation.
func (s *Server) ctxError(ctx context.Context, op string) error {
	if errors.Is(context.Cause(ctx), errTimeout) {
		return fmt.Errorf("mcp server %q: %s: timed out after %s: %w", s.name, op, s.timeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("mcp server %q: %s: %w", s.name, op, ctx.Err())
}

// requestError words the error of a request on sess, and reports whether
// the server answered it. A transport failure ends the session (the next
// call starts a new one); the end of ctx does not.
func (s *Server) requestError(ctx context.Context, sess *session, op string, err error) (_ error, answered bool) {
	if ctx.Err() != nil {
		return s.ctxError(ctx, op), false
	}
	if _, ok := errors.AsType[*transport.Error](err); ok {
		s.lost(sess, err)
		if s.cfg.URL != "" {
			err = stripURLError(err)
		}
		return fmt.Errorf("mcp server %q: %s: %w", s.name, op, err), false
	}
	return fmt.Errorf("mcp server %q: %s: %w", s.name, op, err), true
}

// lost ends sess after a transport failure, unless it has already been
// replaced or Close took it.
func (s *Server) lost(sess *session, cause error) {
	s.mu.Lock()
	if s.sess != sess || s.closed {
		s.mu.Unlock()
		return
	}
	s.sess = nil
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		exit := sess.close()
		attrs := []any{logErr, cause}
		if sess.pid != 0 {
			attrs = append(attrs, logPID, sess.pid)
			if exit != nil {
				attrs = append(attrs, logExit, exit.Error())
			}
			if tail := sess.stderr.String(); tail != "" {
				attrs = append(attrs, logStderr, tail)
			}
		}
		s.log.Warn("mcp server stopped unexpectedly; the next call restarts it", attrs...)
	}()
}

// session is one running process or HTTP session.
type session struct {
	c          *client.Client
	proc       *stdioProc  // stdio only
	pid        int         // stdio only
	stderr     *tail       // stdio only
	tooLarge   atomic.Bool // stdio: the server sent a message over the limit
	stopListen func()

	changes atomic.Uint64 // tools/list_changed notifications received

	sem     chan struct{} // one listing at a time
	tools   []ToolInfo    // cached, guarded by sem
	listed  bool
	listGen uint64 // changes when tools was listed
}

// list returns the cached tools, listing them again if the server said
// they changed.
func (sess *session) list(ctx context.Context, allowed func(string) bool) ([]ToolInfo, error) {
	select {
	case sess.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-sess.sem }()
	gen := sess.changes.Load()
	if sess.listed && sess.listGen == gen {
		return sess.tools, nil
	}
	res, err := sess.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	tools := make([]ToolInfo, 0, len(res.Tools))
	for _, t := range res.Tools {
		if !allowed(t.Name) {
			continue
		}
		tools = append(tools, toolInfo(t))
	}
	sess.tools, sess.listed, sess.listGen = tools, true, gen
	return tools, nil
}

func (sess *session) close() error {
	if sess.stopListen != nil {
		sess.stopListen()
	}
	err := sess.c.Close()
	if sess.proc != nil {
		return sess.proc.stop()
	}
	return err
}

func toolInfo(t mcp.Tool) ToolInfo {
	params := t.RawInputSchema
	if params == nil {
		var err error
		if params, err = json.Marshal(t.InputSchema); err != nil {
			params = json.RawMessage(`{"type":"object"}`)
		}
	}
	readOnly := t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint
	destructive := !readOnly && (t.Annotations.DestructiveHint == nil || *t.Annotations.DestructiveHint)
	return ToolInfo{Name: t.Name, Description: t.Description, Parameters: params, ReadOnly: readOnly, Destructive: destructive}
}

// errTimeout is the cause of this package's own deadline, told apart from
// the caller's.
var errTimeout = errors.New("mcp call timeout")

// tail keeps the last bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// String is the last output, at most max bytes, on one line.
func (t *tail) String() string {
	t.mu.Lock()
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	out := strings.ToValidUTF8(string(b), "")
	t.mu.Unlock()
	return strings.Join(strings.Fields(out), " ")
}

// safeURL is u's scheme://host[:port] only, for errors and logs: user
// info and the query may carry a token, and so may the path (Slack and
// Discord incoming-webhook URLs carry their secret there).
func safeURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "(invalid url)"
	}
	return p.Scheme + "://" + p.Host
}

// stripURLError removes the full URL (which may carry a token in its
// query) that net/http puts in its errors.
func stripURLError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}
