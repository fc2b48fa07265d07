// Package httptool is a core.Tool that calls an HTTP endpoint: the tool
// call's JSON arguments are the request body and the response body is what
// the model sees.
//
// Outcomes, as the engine treats them:
//
//   - 2xx: success. The response body is the tool result, cut to 64 KiB with
//     a "…[truncated N bytes]" marker; an empty body becomes {"status":<code>}.
//   - any other status (including 3xx: redirects are not followed by the
//     default client): a *core.ToolError "HTTP <code>: <body cut to 2 KiB>".
//     The endpoint answered, so the call is not retried; the model is told
//     and decides what to do.
//   - a transport failure (DNS, connection refused or reset, TLS, timeout,
//     a body cut short): a plain error. The engine retries the call with the
//     same Idempotency-Key, so the endpoint must treat a repeated key as the
//     same request. Such an error names the endpoint by scheme://host[:port]
//     only: the user info, path and query may carry a token.
//
// Headers are secrets as far as this package is concerned: it never logs
// them, never puts them in errors, and Config.LogValue redacts their values.
package httptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentgate/agentgate/core"
)

// Limits on what the model is shown.
const (
	// MaxContent is the most bytes of a 2xx response body returned as
	// content, marker included.
	MaxContent = 64 << 10
	// MaxErrorBody is the most bytes of a non-2xx response body quoted in
	// the ToolError, marker included.
	MaxErrorBody = 2 << 10

	// drainLimit bounds how much of an over-long body without a
	// Content-Length is read only to count the truncated bytes.
	drainLimit = 1 << 20
)

// Config configures one HTTP tool.
type Config struct {
	// URL is the endpoint, an absolute http or https URL. Required.
	URL string
	// Method is POST, PUT or PATCH (any case). Default POST.
	Method string
	// Timeout bounds one attempt: connecting, sending and reading the whole
	// response. Default 30s.
	Timeout time.Duration
	// Headers are sent with every call, after Content-Type (so they may
	// override it). They may carry credentials and are never logged.
	// Idempotency-Key and Host cannot be set here.
	Headers map[string]string
	// Client sends the requests. Default: a client that does not follow
	// redirects, so a 3xx is reported to the model instead of re-sending
	// the body (and the headers) to another address.
	Client *http.Client
}

// LogValue implements slog.LogValuer: the URL's scheme://host[:port] only
// and header names with redacted values.
func (c Config) LogValue() slog.Value {
	names := make([]string, 0, len(c.Headers))
	for k := range c.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	return slog.GroupValue(
		slog.String("url", safeURL(c.URL)),
		slog.String("method", c.Method),
		slog.Duration("timeout", c.Timeout),
		slog.String("headers", strings.Join(names, ",")+" (values redacted)"),
	)
}

func (c Config) validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("url: must be an absolute http(s) URL")
	}
	switch strings.ToUpper(c.Method) {
	case "", http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return fmt.Errorf("method: must be POST, PUT or PATCH, got %q", c.Method)
	}
	if c.Timeout < 0 {
		return errors.New("timeout: must not be negative (0 means 30s)")
	}
	for name, value := range c.Headers {
		if !ValidHeaderName(name) {
			return fmt.Errorf("headers: %q is not a valid header name", name)
		}
		switch http.CanonicalHeaderKey(name) {
		case "Idempotency-Key":
			return errors.New("headers: Idempotency-Key is set on every call from the run and tool call ids; remove it")
		case "Host", "Content-Length", "Transfer-Encoding", "Connection":
			return fmt.Errorf("headers: %s is managed by the HTTP client; remove it", http.CanonicalHeaderKey(name))
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			// Do not quote the value: it may be a secret.
			return fmt.Errorf("headers: value of %s contains a line break or NUL", name)
		}
	}
	return nil
}

// Tool calls one HTTP endpoint. It is safe for concurrent use.
type Tool struct {
	url     string
	method  string
	timeout time.Duration
	headers http.Header
	client  *http.Client
}

var _ core.Tool = (*Tool)(nil)

// New validates cfg and returns the tool. Errors name the field at fault,
// e.g. "url: must be an absolute http(s) URL", for the caller to prefix with
// where the tool was configured.
func New(cfg Config) (*Tool, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	t := &Tool{
		url:     cfg.URL,
		method:  strings.ToUpper(cfg.Method),
		timeout: cfg.Timeout,
		headers: make(http.Header, len(cfg.Headers)),
		client:  cfg.Client,
	}
	if t.method == "" {
		t.method = http.MethodPost
	}
	if t.timeout == 0 {
		t.timeout = 30 * time.Second
	}
	for k, v := range cfg.Headers {
		t.headers.Set(k, v)
	}
	if t.client == nil {
		t.client = &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return t, nil
}

// Call is CallFiles for callers that take text only: a file the endpoint
// returns is described, not given.
func (t *Tool) Call(ctx context.Context, args json.RawMessage, idempotencyKey string) (string, error) {
	content, files, err := t.CallFiles(ctx, args, idempotencyKey)
	for _, f := range files {
		content += f.Describe()
	}
	return content, err
}

var _ core.FileTool = (*Tool)(nil)

// CallFiles sends args as the JSON request body with the Idempotency-Key
// header and returns the response body; a response that is not text (an
// image, a PDF: see IsFile) is returned as a file of at most MaxFileBytes,
// named by its Content-Disposition. See the package documentation for which
// errors are a *core.ToolError (shown to the model) and which are transport
// errors (retried with the same key).
func (t *Tool) CallFiles(ctx context.Context, args json.RawMessage, idempotencyKey string) (string, []core.File, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, t.timeout, errTimeout)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, t.method, t.url, bytes.NewReader(args))
	if err != nil {
		return "", nil, fmt.Errorf("http tool %s %s: %w", t.method, safeURL(t.url), err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentgate")
	for k, vs := range t.headers {
		req.Header[k] = slices.Clone(vs)
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}

	resp, err := t.client.Do(req)
	if err != nil {
		return "", nil, t.transportError(ctx, err)
	}
	defer resp.Body.Close()

	ok := resp.StatusCode >= 200 && resp.StatusCode <= 299
	if ctype := resp.Header.Get("Content-Type"); ok && IsFile(ctype) {
		f, err := t.readFile(ctx, resp, ctype)
		if err != nil {
			return "", nil, err
		}
		return "", []core.File{f}, nil
	}
	limit := MaxContent
	if !ok {
		limit = MaxErrorBody
	}
	body, err := readLimited(resp.Body, resp.ContentLength, limit)
	if err != nil {
		return "", nil, t.transportError(ctx, fmt.Errorf("read response: %w", err))
	}
	if ok {
		if body == "" {
			return fmt.Sprintf(`{"status":%d}`, resp.StatusCode), nil, nil
		}
		return body, nil, nil
	}
	msg := strings.TrimSpace(body)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return "", nil, &core.ToolError{Message: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, msg)}
}

// MaxFileBytes is the largest file a tool may return.
const MaxFileBytes = 20_000_000

// IsFile reports whether a 2xx response of Content-Type ctype is a file for
// the conversation rather than text for the model: an image, audio, video
// or font, or an application/* type other than JSON, XML, JavaScript and
// form data. A missing or malformed type is text.
func IsFile(ctype string) bool {
	mt, _, err := mime.ParseMediaType(ctype)
	if err != nil {
		return false
	}
	top, sub, ok := strings.Cut(mt, "/")
	if !ok || sub == "" {
		return false
	}
	switch top {
	case "image", "audio", "video", "font":
		return true
	case "application":
		switch {
		case sub == "json", strings.HasSuffix(sub, "+json"), sub == "xml", strings.HasSuffix(sub, "+xml"),
			sub == "javascript", sub == "x-www-form-urlencoded", sub == "x-ndjson":
			return false
		}
		return true
	}
	return false
}

// readFile reads a file response, refusing one over MaxFileBytes.
func (t *Tool) readFile(ctx context.Context, resp *http.Response, ctype string) (core.File, error) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxFileBytes+1))
	if err != nil {
		return core.File{}, t.transportError(ctx, fmt.Errorf("read response: %w", err))
	}
	if len(data) > MaxFileBytes {
		return core.File{}, &core.ToolError{Message: fmt.Sprintf("the tool returned a file larger than %s", core.ByteSize(MaxFileBytes))}
	}
	mt, _, _ := mime.ParseMediaType(ctype)
	name := "result"
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil && params["filename"] != "" {
		name = path.Base(params["filename"])
	} else if exts, _ := mime.ExtensionsByType(mt); len(exts) > 0 {
		name += exts[0]
	}
	return core.File{Attachment: core.Attachment{Name: name, MIME: mt, Size: int64(len(data))}, Data: data}, nil
}

// errTimeout is the cause of this package's own deadline, told apart from
// the caller's.
var errTimeout = errors.New("http tool timeout")

// transportError words a failure to get a whole response. The *url.Error
// from the client is unwrapped because it repeats the full URL.
func (t *Tool) transportError(ctx context.Context, err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	if errors.Is(context.Cause(ctx), errTimeout) {
		err = fmt.Errorf("timed out after %s: %w", t.timeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("http tool %s %s: %w", t.method, safeURL(t.url), err)
}

// readLimited reads a body of at most limit bytes. A longer body is cut at
// a UTF-8 boundary and ends with "…[truncated N bytes]", the whole staying
// within limit.
func readLimited(r io.Reader, contentLength int64, limit int) (string, error) {
	buf, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return "", err
	}
	if len(buf) <= limit {
		return string(buf), nil
	}
	const reserve = 64 // room for the marker
	keep := limit - reserve
	for keep > 0 && !utf8.RuneStart(buf[keep]) {
		keep--
	}
	total, atLeast := int64(len(buf)), ""
	if contentLength >= 0 {
		total = contentLength
	} else {
		n, err := io.Copy(io.Discard, io.LimitReader(r, drainLimit))
		total += n
		if err != nil || n == drainLimit {
			atLeast = "at least "
		}
	}
	return fmt.Sprintf("%s…[truncated %s%d bytes]", buf[:keep], atLeast, total-int64(keep)), nil
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

// ValidHeaderName reports whether s is a valid HTTP header field name
// (RFC 9110 token).
func ValidHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
