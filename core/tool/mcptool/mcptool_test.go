package mcptool

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentgate/agentgate/core"
)

// The test binary is also the MCP server the tests start: with
// MCPTOOL_TEST_SERVER=1 it serves the tools of testServer on stdio.
const (
	envServer = "MCPTOOL_TEST_SERVER"
	envDir    = "MCPTOOL_TEST_DIR" // where the server writes "starts" and "calls"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envServer) {
	case "1":
		serveStdio()
		os.Exit(0)
	case "badstart":
		fmt.Fprintln(os.Stderr, "starting test server")
		fmt.Fprintln(os.Stderr, "fatal: GITHUB_TOKEN is not set")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// serveStdio runs the test server; it notes its start and exit in
// $MCPTOOL_TEST_DIR/starts.
func serveStdio() {
	dir := os.Getenv(envDir)
	note(filepath.Join(dir, "starts"), fmt.Sprintf("start %d", os.Getpid()))
	if err := server.ServeStdio(testServer(dir)); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
	}
	note(filepath.Join(dir, "starts"), fmt.Sprintf("exit %d", os.Getpid()))
}

func note(file, line string) {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, line); err != nil {
		panic(err)
	}
}

func testServer(dir string) *server.MCPServer {
	s := server.NewMCPServer("test", "1.0.0", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Echoes text."), mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithString("text", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	s.AddTool(mcp.NewTool("delete_item", mcp.WithDestructiveHintAnnotation(true), mcp.WithString("id", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			key := ""
			if req.Params.Meta != nil {
				key, _ = req.Params.Meta.AdditionalFields[IdempotencyKeyMeta].(string)
			}
			id := req.GetString("id", "")
			note(filepath.Join(dir, "calls"), id+" "+key)
			return mcp.NewToolResultText("deleted " + id), nil
		})
	s.AddTool(mcp.NewTool("fail"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("the item is locked"), nil
	})
	s.AddTool(mcp.NewTool("image"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultImage("a red dot", base64.StdEncoding.EncodeToString(testPNG()), "image/png"), nil
	})
	s.AddTool(mcp.NewTool("big_text"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(bigText()), nil
	})
	s.AddTool(mcp.NewTool("many_images"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res := &mcp.CallToolResult{}
		for range manyImages {
			res.Content = append(res.Content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(testPNG()), "image/png"))
		}
		return res, nil
	})
	s.AddTool(mcp.NewTool("crash"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(1)
		return nil, nil
	})
	s.AddTool(mcp.NewTool("slow"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s.AddTool(mcp.NewTool("env"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var names []string
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			names = append(names, k)
		}
		slices.Sort(names)
		return mcp.NewToolResultText(strings.Join(names, " ")), nil
	})
	s.AddTool(mcp.NewTool("add_tool", mcp.WithString("name", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			name := req.GetString("name", "")
			s.AddTool(mcp.NewTool(name, mcp.WithDestructiveHintAnnotation(false)),
				func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("I am " + name), nil
				})
			return mcp.NewToolResultText("added " + name), nil
		})
	return s
}

// bigText is 1 MB of text, "a" then two-byte runes: a cut at an even
// offset falls inside a rune.
func bigText() string { return "a" + strings.Repeat("é", 1<<19) }

// manyImages is how many images many_images returns.
const manyImages = 20

// testPNG is a 2x2 PNG.
func testPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// logs records log messages; wait blocks until one is seen.
type logs struct {
	mu      sync.Mutex
	msgs    []string
	changed chan struct{}
}

func newLogs() *logs { return &logs{changed: make(chan struct{})} }

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logs) WithGroup(string) slog.Handler            { return l }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	l.mu.Lock()
	l.msgs = append(l.msgs, line)
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	return nil
}

// wait returns the first line (level, message and attributes) containing
// want, waiting for it.
func (l *logs) wait(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		l.mu.Lock()
		for _, m := range l.msgs {
			if strings.Contains(m, want) {
				l.mu.Unlock()
				return m
			}
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no log line with %q; have %q", want, l.msgs)
		}
	}
}

type fixture struct {
	srv  *Server
	dir  string
	logs *logs
}

// newStdio returns a server running the test binary, not started.
func newStdio(t *testing.T, edit func(*Config)) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), logs: newLogs()}
	cfg := Config{
		Name:    "test",
		Command: os.Args[0],
		Env:     map[string]string{envServer: "1", envDir: f.dir},
		Logger:  slog.New(f.logs),
	}
	if edit != nil {
		edit(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	f.srv = srv
	return f
}

// lines returns the lines of the test server's file name.
func (f *fixture) lines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// starts counts the test server's starts.
func (f *fixture) starts(t *testing.T) int {
	t.Helper()
	n := 0
	for _, l := range f.lines(t, "starts") {
		if strings.HasPrefix(l, "start ") {
			n++
		}
	}
	return n
}

func (f *fixture) call(t *testing.T, name, args, key string) (string, []core.File, error) {
	t.Helper()
	return f.srv.Tool(name).CallFiles(t.Context(), json.RawMessage(args), key)
}

func names(tools []ToolInfo) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return out
}

var allTools = []string{"add_tool", "big_text", "crash", "delete_item", "echo", "env", "fail", "image", "many_images", "slow"}

func TestToolsStartLazilyOnce(t *testing.T) {
	t.Parallel()
	f := newStdio(t, nil)
	_ = f.srv.Tool("echo") // a handle starts nothing
	if n := f.starts(t); n != 0 {
		t.Fatalf("started %d times before the first call", n)
	}

	var wg sync.WaitGroup
	results := make([][]ToolInfo, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = f.srv.Tools(t.Context()) })
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("Tools: %v", errs[i])
		}
		if got := names(results[i]); !slices.Equal(got, allTools) {
			t.Errorf("Tools = %v, want %v", got, allTools)
		}
	}
	if n := f.starts(t); n != 1 {
		t.Errorf("concurrent first calls started the server %d times, want 1", n)
	}
	line := f.logs.wait(t, "mcp server started")
	if !strings.Contains(line, "INFO") || !strings.Contains(line, "tools=10") || !strings.Contains(line, "pid=") {
		t.Errorf("start log = %q, want INFO with pid and tools=10", line)
	}

	byName := map[string]ToolInfo{}
	for _, ti := range results[0] {
		byName[ti.Name] = ti
	}
	echo := byName["echo"]
	if echo.Description != "Echoes text." || !echo.ReadOnly || echo.Destructive {
		t.Errorf("echo = %+v, want its description, read-only, not destructive", echo)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(echo.Parameters, &schema); err != nil || schema.Type != "object" ||
		schema.Properties["text"] == nil || !slices.Equal(schema.Required, []string{"text"}) {
		t.Errorf("echo parameters = %s (%v), want an object schema requiring text", echo.Parameters, err)
	}
	if d := byName["delete_item"]; d.ReadOnly || !d.Destructive {
		t.Errorf("delete_item = %+v, want destructive", d)
	}
}

func TestAllowDeny(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		allow, deny []string
		want        []string
		denied      string
	}{
		{name: "all", want: allTools},
		{name: "allow", allow: []string{"echo", "delete_*"}, want: []string{"delete_item", "echo"}, denied: "fail"},
		{name: "deny wins", allow: []string{"*"}, deny: []string{"delete_*", "crash"},
			want: []string{"add_tool", "big_text", "echo", "env", "fail", "image", "many_images", "slow"}, denied: "delete_item"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newStdio(t, func(c *Config) { c.Allow, c.Deny = tt.allow, tt.deny })
			tools, err := f.srv.Tools(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got := names(tools); !slices.Equal(got, tt.want) {
				t.Errorf("Tools = %v, want %v", got, tt.want)
			}
			if tt.denied == "" {
				return
			}
			_, _, err = f.call(t, tt.denied, `{"id":"1"}`, "k")
			var te *core.ToolError
			want := fmt.Sprintf("tool %s of server test is not allowed", tt.denied)
			if !errors.As(err, &te) || te.Message != want {
				t.Errorf("calling %s: %v, want ToolError %q", tt.denied, err, want)
			}
			if calls := f.lines(t, "calls"); calls != nil {
				t.Errorf("the denied tool ran: %v", calls)
			}
		})
	}
}

// Allow and deny globs name tools whose names hold '/' (a proxy's
// "github/delete_repo") as they name others: a deny of "*delete*" or "*"
// is not slipped past by a slash.
func TestAllowDenyNamesWithSlashes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		allow, deny []string
		name        string
		want        bool
	}{
		{nil, []string{"*delete*"}, "github/delete_repo", false},
		{nil, []string{"*"}, "github/list_repos", false},
		{[]string{"github/*"}, nil, "github/list_repos", true},
		{[]string{"get_*"}, nil, "github/get_repo", false},
		{[]string{"*get_*"}, []string{"*/delete_*"}, "github/get_repo", true},
	} {
		srv, err := New(Config{Name: "proxy", Command: "proxy-mcp", Allow: tt.allow, Deny: tt.deny})
		if err != nil {
			t.Fatal(err)
		}
		if got := srv.allowed(tt.name); got != tt.want {
			t.Errorf("allow %q, deny %q: %s allowed = %v, want %v", tt.allow, tt.deny, tt.name, got, tt.want)
		}
	}
}

func TestCall(t *testing.T) {
	t.Parallel()
	f := newStdio(t, nil)

	t.Run("echo", func(t *testing.T) {
		got, err := f.srv.Tool("echo").Call(t.Context(), json.RawMessage(`{"text":"hello"}`), "k1")
		if err != nil || got != "hello" {
			t.Errorf("echo = %q, %v; want hello", got, err)
		}
	})
	t.Run("idempotency key in _meta", func(t *testing.T) {
		got, _, err := f.call(t, "delete_item", `{"id":"42"}`, "run-1/call-7")
		if err != nil || got != "deleted 42" {
			t.Fatalf("delete_item = %q, %v", got, err)
		}
		if calls := f.lines(t, "calls"); !slices.Equal(calls, []string{"42 run-1/call-7"}) {
			t.Errorf("server saw %q, want the id and the key", calls)
		}
	})
	t.Run("isError", func(t *testing.T) {
		_, _, err := f.call(t, "fail", `{}`, "k")
		var te *core.ToolError
		if !errors.As(err, &te) || te.Message != "the item is locked" {
			t.Errorf("fail: %v, want ToolError with the result's text", err)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		_, _, err := f.call(t, "nope", `{}`, "k")
		var te *core.ToolError
		if !errors.As(err, &te) || !strings.Contains(te.Message, "nope") {
			t.Errorf("nope: %v, want a ToolError naming it (the server answered)", err)
		}
	})
	t.Run("arguments not an object", func(t *testing.T) {
		_, _, err := f.call(t, "echo", `["hello"]`, "k")
		var te *core.ToolError
		if !errors.As(err, &te) {
			t.Errorf("echo [...]: %v, want a ToolError", err)
		}
	})
	t.Run("image", func(t *testing.T) {
		content, files, err := f.call(t, "image", ``, "k")
		if err != nil {
			t.Fatal(err)
		}
		want := testPNG()
		if len(files) != 1 || !bytes.Equal(files[0].Data, want) || files[0].MIME != "image/png" ||
			files[0].Name != "image-1.png" || files[0].Size != int64(len(want)) {
			t.Fatalf("files = %+v, want one image-1.png of %d bytes", files, len(want))
		}
		if wantText := fmt.Sprintf("a red dot\n[image image-1.png, image/png, %d bytes]", len(want)); content != wantText {
			t.Errorf("content = %q, want %q", content, wantText)
		}
		text, err := f.srv.Tool("image").Call(t.Context(), nil, "k")
		if err != nil || text != content {
			t.Errorf("Call = %q, %v; want the same text as CallFiles", text, err)
		}
	})
	t.Run("minimal environment", func(t *testing.T) {
		got, _, err := f.call(t, "env", `{}`, "k")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range strings.Fields(got) {
			switch name {
			case "PATH", "HOME", envServer, envDir:
			default:
				t.Errorf("the server inherited %s; want only PATH, HOME and Env", name)
			}
		}
	})
}

// TestResultLimits: a tool result gives the model at most MaxContent bytes
// of text and MaxFiles images, and says what it left out.
func TestResultLimits(t *testing.T) {
	t.Parallel()
	f := newStdio(t, nil)

	t.Run("1 MB of text", func(t *testing.T) {
		content, _, err := f.call(t, "big_text", `{}`, "k")
		if err != nil {
			t.Fatal(err)
		}
		if len(content) > MaxContent {
			t.Errorf("content is %d bytes, want at most %d", len(content), MaxContent)
		}
		if !utf8.ValidString(content) {
			t.Error("content is not valid UTF-8: cut inside a rune")
		}
		full := bigText()
		kept, marker, ok := strings.Cut(content, "…[truncated ")
		if !ok || !strings.HasPrefix(full, kept) || len(kept) < MaxContent-64-utf8.UTFMax {
			t.Fatalf("content = %q…%q, want most of the text then a truncation marker", content[:20], content[max(len(content)-40, 0):])
		}
		if want := fmt.Sprintf("%d bytes]", len(full)-len(kept)); marker != want {
			t.Errorf("marker ends %q, want %q (the bytes left out)", marker, want)
		}
	})
	t.Run("20 images", func(t *testing.T) {
		content, files, err := f.call(t, "many_images", `{}`, "k")
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != MaxFiles {
			t.Fatalf("%d files, want %d", len(files), MaxFiles)
		}
		for i, file := range files {
			if want := fmt.Sprintf("image-%d.png", i+1); file.Name != want || !bytes.Equal(file.Data, testPNG()) {
				t.Errorf("file %d = %s (%d bytes), want %s, the image", i, file.Name, len(file.Data), want)
			}
		}
		for i := MaxFiles + 1; i <= manyImages; i++ {
			want := fmt.Sprintf("[image image-%d.png, image/png: over the limit of %d images per result, not kept]", i, MaxFiles)
			if !strings.Contains(content, want) {
				t.Errorf("content = %q, want it to say %q", content, want)
			}
		}
	})
}

func TestCrashRestarts(t *testing.T) {
	t.Parallel()
	f := newStdio(t, nil)
	if _, err := f.srv.Tools(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, _, err := f.call(t, "crash", `{}`, "k")
	var te *core.ToolError
	if err == nil || errors.As(err, &te) {
		t.Fatalf("crash: %v, want a plain (retried) error", err)
	}
	if !strings.Contains(err.Error(), `mcp server "test"`) {
		t.Errorf("crash error %q does not name the server", err)
	}
	got, _, err := f.call(t, "echo", `{"text":"again"}`, "k")
	if err != nil || got != "again" {
		t.Fatalf("echo after the crash = %q, %v", got, err)
	}
	if n := f.starts(t); n != 2 {
		t.Errorf("started %d times, want 2", n)
	}
	if line := f.logs.wait(t, "stopped unexpectedly"); !strings.HasPrefix(line, "WARN") {
		t.Errorf("stop log = %q, want a warning", line)
	}
	f.logs.wait(t, "restarts=1")
}

// TestStdioMessageLimit: a process whose output line (one message) goes
// over the limit is not read further: the call is a ToolError (not
// retried), the process is stopped, and the next call starts it again.
func TestStdioMessageLimit(t *testing.T) {
	t.Parallel()
	f := newStdio(t, nil)
	f.srv.maxMessage = 64 << 10
	_, _, err := f.call(t, "big_text", `{}`, "k")
	var te *core.ToolError
	want := "server test sent a message larger than 65.5 KB while tool big_text ran; it was not read and the server was restarted: the call's outcome is unknown"
	if !errors.As(err, &te) || te.Message != want {
		t.Fatalf("big_text: %v, want ToolError %q", err, want)
	}
	// The server, blocked writing the rest of its line, ends on its own
	// (its stdout is closed), not killed.
	if line := f.logs.wait(t, "stopped unexpectedly"); !strings.Contains(line, "message too large") || strings.Contains(line, "killed") {
		t.Errorf("stop log = %q, want the reason, and no kill", line)
	}
	got, _, err := f.call(t, "echo", `{"text":"again"}`, "k")
	if err != nil || got != "again" {
		t.Fatalf("echo after a message too large = %q, %v", got, err)
	}
	if n := f.starts(t); n != 2 {
		t.Errorf("started %d times, want 2", n)
	}
}

func TestToolsListChanged(t *testing.T) {
	t.Parallel()
	f := newStdio(t, nil)
	before, err := f.srv.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.call(t, "add_tool", `{"name":"fresh"}`, "k"); err != nil {
		t.Fatal(err)
	}
	f.logs.wait(t, "tools changed")
	after, err := f.srv.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := append(names(before), "fresh"); !slices.Equal(names(after), slices.Sorted(slices.Values(want))) {
		t.Errorf("Tools after list_changed = %v, want %v", names(after), want)
	}
	if got, _, err := f.call(t, "fresh", `{}`, "k"); err != nil || got != "I am fresh" {
		t.Errorf("fresh = %q, %v", got, err)
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	t.Run("own timeout", func(t *testing.T) {
		t.Parallel()
		f := newStdio(t, func(c *Config) { c.Timeout = 2 * time.Second })
		if _, err := f.srv.Tools(t.Context()); err != nil {
			t.Fatal(err)
		}
		_, _, err := f.call(t, "slow", `{}`, "k")
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after 2s") {
			t.Errorf("slow: %v, want a timeout after 2s", err)
		}
		if got, _, err := f.call(t, "echo", `{"text":"still here"}`, "k"); err != nil || got != "still here" {
			t.Errorf("echo after a timeout = %q, %v", got, err)
		}
		if n := f.starts(t); n != 1 {
			t.Errorf("a timeout restarted the server (%d starts)", n)
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		t.Parallel()
		f := newStdio(t, nil)
		if _, err := f.srv.Tools(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err := f.srv.Tool("slow").Call(ctx, nil, "k")
		var te *core.ToolError
		if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) {
			t.Errorf("slow: %v, want the caller's deadline as a plain error", err)
		}
	})
}

func TestStartFailure(t *testing.T) {
	t.Parallel()
	t.Run("no such command", func(t *testing.T) {
		t.Parallel()
		cmd := filepath.Join(t.TempDir(), "no-such-mcp-server")
		f := newStdio(t, func(c *Config) { c.Command = cmd })
		_, err := f.srv.Tools(t.Context())
		if err == nil || !strings.Contains(err.Error(), cmd) || !strings.Contains(err.Error(), `"test"`) {
			t.Fatalf("Tools: %v, want an error naming the server and the command", err)
		}
		_, _, err = f.call(t, "echo", `{"text":"x"}`, "k")
		var te *core.ToolError
		if err == nil || errors.As(err, &te) || !strings.Contains(err.Error(), "next start attempt in") {
			t.Errorf("call right after a failed start: %v, want the start error, with the backoff", err)
		}
	})
	t.Run("stderr", func(t *testing.T) {
		t.Parallel()
		f := newStdio(t, func(c *Config) { c.Env[envServer] = "badstart" })
		_, err := f.srv.Tools(t.Context())
		if err == nil || !strings.Contains(err.Error(), "fatal: GITHUB_TOKEN is not set") {
			t.Fatalf("Tools: %v, want the end of the server's stderr", err)
		}
	})
}

func TestClose(t *testing.T) {
	t.Parallel()
	f := newStdio(t, nil)
	if _, err := f.srv.Tools(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Close(); err != nil {
		t.Fatal(err)
	}
	lines := f.lines(t, "starts")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "exit ") || lines[0][len("start "):] != lines[1][len("exit "):] {
		t.Errorf("server file = %q, want the process to have exited", lines)
	}
	if _, _, err := f.call(t, "echo", `{"text":"x"}`, "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
	if _, err := f.srv.Tools(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Tools after Close: %v, want ErrClosed", err)
	}
	if n := f.starts(t); n != 1 {
		t.Errorf("started %d times, want 1", n)
	}
}

func TestStreamableHTTP(t *testing.T) {
	t.Parallel()
	mcpSrv := server.NewMCPServer("http-test", "1.0.0", server.WithToolCapabilities(true))
	mcpSrv.AddTool(mcp.NewTool("echo", mcp.WithString("text")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	handler := server.NewStreamableHTTPServer(mcpSrv)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	t.Run("headers sent", func(t *testing.T) {
		t.Parallel()
		logs := newLogs()
		srv, err := New(Config{Name: "remote", URL: ts.URL + "/mcp?token=hidden",
			Headers: map[string]string{"Authorization": "Bearer s3cret"}, Logger: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		got, err := srv.Tool("echo").Call(t.Context(), json.RawMessage(`{"text":"over http"}`), "k")
		if err != nil || got != "over http" {
			t.Fatalf("echo = %q, %v", got, err)
		}
		line := logs.wait(t, "mcp server connected")
		if !strings.Contains(line, "url="+ts.URL+" ") || strings.Contains(line, "/mcp") || strings.Contains(line, "hidden") || strings.Contains(line, "s3cret") {
			t.Errorf("connect log = %q, want the URL's scheme://host:port only and no secrets", line)
		}
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	t.Run("wrong credentials", func(t *testing.T) {
		t.Parallel()
		// The path may be a secret, as in a webhook URL.
		srv, err := New(Config{Name: "remote", URL: ts.URL + "/mcp/XXXXSECRETXXXX",
			Headers: map[string]string{"Authorization": "Bearer wrong"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		_, err = srv.Tools(t.Context())
		if err == nil || !strings.Contains(err.Error(), "url "+ts.URL+")") || strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "wrong") {
			t.Errorf("Tools: %v, want an error naming the URL's scheme://host:port, without its path or the header", err)
		}
	})
}

// TestHTTPMessageLimit: over HTTP, a result larger than the message limit
// is not read: the call is a ToolError (not retried) and the session goes
// on. As a JSON response and as an event of an event stream.
func TestHTTPMessageLimit(t *testing.T) {
	t.Parallel()
	mcpSrv := server.NewMCPServer("http-test", "1.0.0", server.WithToolCapabilities(true))
	mcpSrv.AddTool(mcp.NewTool("echo", mcp.WithString("text")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	mcpSrv.AddTool(mcp.NewTool("big_text", mcp.WithBoolean("notify")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.GetBool("notify", false) {
				// A notification first makes the response an event stream.
				err := server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/message",
					map[string]any{"level": "info", "data": "working"})
				if err != nil {
					return nil, err
				}
			}
			return mcp.NewToolResultText(bigText()), nil
		})
	handler := server.NewStreamableHTTPServer(mcpSrv)
	// The type of each big_text answer, once the server is done with it:
	// the client stops reading a stream over the limit before that.
	types := make(chan string, 4)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		handler.ServeHTTP(w, r)
		if bytes.Contains(body, []byte(`"big_text"`)) {
			types <- w.Header().Get("Content-Type")
		}
	}))
	t.Cleanup(ts.Close)
	logs := newLogs()
	srv, err := New(Config{Name: "remote", URL: ts.URL + "/mcp", Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	srv.maxMessage = 64 << 10
	t.Cleanup(func() { _ = srv.Close() })

	for _, tt := range []struct{ name, args, ctype string }{
		{"json response", `{}`, "application/json"},
		{"event stream", `{"notify":true}`, "text/event-stream"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := srv.Tool("big_text").CallFiles(t.Context(), json.RawMessage(tt.args), "k")
			var te *core.ToolError
			want := "tool big_text of server remote returned a result larger than 65.5 KB; it was not read"
			if !errors.As(err, &te) || te.Message != want {
				t.Errorf("big_text: %v, want ToolError %q", err, want)
			}
			select {
			case got := <-types:
				if got != tt.ctype {
					t.Errorf("the server answered with %q, want %q", got, tt.ctype)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the server never finished its answer to big_text")
			}
			if got, err := srv.Tool("echo").Call(t.Context(), json.RawMessage(`{"text":"still here"}`), "k"); err != nil || got != "still here" {
				t.Errorf("echo after a result too large = %q, %v", got, err)
			}
		})
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	connects := 0
	for _, m := range logs.msgs {
		if strings.Contains(m, "mcp server connected") {
			connects++
		}
	}
	if connects != 1 {
		t.Errorf("connected %d times, want once: a result too large does not end the session", connects)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		want string // in the error; "" for none
	}{
		{"command", Config{Name: "a", Command: "srv", Allow: []string{"get_*"}}, ""},
		{"url", Config{Name: "a", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "x"}}, ""},
		{"no name", Config{Command: "srv"}, "name: required"},
		{"neither", Config{Name: "a"}, "set command"},
		{"both", Config{Name: "a", Command: "srv", URL: "https://x"}, "not both"},
		{"not http", Config{Name: "a", URL: "ftp://x/mcp"}, "url: must be an absolute http(s) URL"},
		{"relative url", Config{Name: "a", URL: "/mcp"}, "url: must be an absolute http(s) URL"},
		{"bad allow glob", Config{Name: "a", Command: "srv", Allow: []string{"ok", "get_["}}, `allow[1]: "get_["`},
		{"bad deny glob", Config{Name: "a", Command: "srv", Deny: []string{"[x"}}, `deny[0]: "[x"`},
		{"negative timeout", Config{Name: "a", Command: "srv", Timeout: -time.Second}, "timeout"},
		{"headers with command", Config{Name: "a", Command: "srv", Headers: map[string]string{"A": "b"}}, "headers"},
		{"env with url", Config{Name: "a", URL: "https://x/mcp", Env: map[string]string{"A": "b"}}, "env"},
		{"header line break", Config{Name: "a", URL: "https://x/mcp", Headers: map[string]string{"A": "b\r\nC: d"}}, "line break"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("New: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("New: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	pngData := testPNG()
	b64 := base64.StdEncoding.EncodeToString
	small := limits{content: 70, files: 2, fileBytes: 10}
	tests := []struct {
		name      string
		res       *mcp.CallToolResult
		want      string
		wantFiles []string
		lim       limits // resultLimits when zero
	}{
		{"texts", &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("a"), mcp.NewTextContent("b")}}, "a\nb", nil, limits{}},
		{"structured only", mcp.NewToolResultStructuredOnly(map[string]any{"n": 1}), `{"n":1}`, nil, limits{}},
		{"structured with text", mcp.NewToolResultStructured(map[string]any{"n": 1}, "one"), "one", nil, limits{}},
		{"images", &mcp.CallToolResult{Content: []mcp.Content{
			mcp.NewImageContent(b64(pngData), "image/png"), mcp.NewImageContent(b64([]byte("jpg")), "image/jpeg")}},
			fmt.Sprintf("[image image-1.png, image/png, %d bytes]\n[image image-2.jpg, image/jpeg, 3 bytes]", len(pngData)),
			[]string{"image-1.png", "image-2.jpg"}, limits{}},
		{"bad image", &mcp.CallToolResult{Content: []mcp.Content{mcp.NewImageContent("%%%", "image/png")}},
			"[image image-1.png, image/png: invalid base64 data]", nil, limits{}},
		{"audio", &mcp.CallToolResult{Content: []mcp.Content{mcp.NewAudioContent(b64([]byte("12345")), "audio/wav")}},
			"[audio, audio/wav, 5 bytes]", nil, limits{}},
		{"resources", &mcp.CallToolResult{Content: []mcp.Content{
			mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "file:///a.txt", Text: "file text"}),
			mcp.NewEmbeddedResource(mcp.BlobResourceContents{URI: "file:///b.bin", MIMEType: "application/pdf", Blob: b64([]byte("pdf"))}),
		}}, "file text\n[resource file:///b.bin, application/pdf, 3 bytes]", nil, limits{}},
		{"text cut inside a rune", &mcp.CallToolResult{Content: []mcp.Content{
			mcp.NewTextContent("a" + strings.Repeat("é", 50)), mcp.NewTextContent("b")}},
			"aéé…[truncated 98 bytes]", nil, small},
		{"image limits", &mcp.CallToolResult{Content: []mcp.Content{
			mcp.NewImageContent(b64([]byte("123456")), "image/png"),
			mcp.NewImageContent(b64([]byte("123456")), "image/gif"),
			mcp.NewImageContent(b64([]byte("1234")), "image/jpeg"),
			mcp.NewImageContent(b64([]byte("1")), "image/png")}},
			"[image image-1.png, image/png, 6 bytes]\n" +
				"[image image-2.gif, image/gif, 6 bytes: over the limit of 10 B of images per result, not kept]\n" +
				"[image image-3.jpg, image/jpeg, 4 bytes]\n" +
				"[image image-4.png, image/png: over the limit of 2 images per result, not kept]",
			[]string{"image-1.png", "image-3.jpg"}, limits{content: MaxContent, files: 2, fileBytes: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Through the wire format, as the client reads it.
			js, err := json.Marshal(tt.res)
			if err != nil {
				t.Fatal(err)
			}
			var res mcp.CallToolResult
			if err := json.Unmarshal(js, &res); err != nil {
				t.Fatal(err)
			}
			lim := tt.lim
			if lim == (limits{}) {
				lim = resultLimits
			}
			got, files := render(&res, lim)
			if got != tt.want {
				t.Errorf("content = %q, want %q", got, tt.want)
			}
			var gotFiles []string
			for _, f := range files {
				gotFiles = append(gotFiles, f.Name)
			}
			if !slices.Equal(gotFiles, tt.wantFiles) {
				t.Errorf("files = %v, want %v", gotFiles, tt.wantFiles)
			}
		})
	}
}
