// Package testbin builds the agentgate binary once per test process and runs
// `agentgate serve` as a subprocess, for the end-to-end suite
// (cmd/agentgate) and the fault suite (test/fault); the bench's tests
// (internal/bench) take only the binary.
//
// A process listens where the operating system puts it: the first start
// asks for port 0 and reads the address from the line serve prints
// ("agentgate listening on http://…"), so no other test can take the port
// between choosing and binding it. Later starts reuse that address, as a
// restarted gateway would; if something took it meanwhile, the start moves
// to a new port and Base follows.
package testbin

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// Main runs the tests and removes the built binary afterwards; call it from
// TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// Binary returns the path of cmd/agentgate built with the go command that
// runs the tests, building it on first use. It skips in -short mode.
func Binary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode (builds and runs the real agentgate binary)")
	}
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "agentgate-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.dir = dir
		goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goCmd); err != nil {
			goCmd = "go"
		}
		bin := filepath.Join(dir, "agentgate")
		out, err := exec.Command(goCmd, "build", "-o", bin, "github.com/agentgate/agentgate/cmd/agentgate").CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build ./cmd/agentgate: %v\n%s", err, out)
			return
		}
		build.bin = bin
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.bin
}

// CleanEnv is this process's environment without any agentgate or provider
// settings, plus extra (KEY=VALUE).
func CleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AGENTGATE_") || strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "ANTHROPIC_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// Buffer collects a process's output; it is safe for concurrent use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Options shape a serve process.
type Options struct {
	Bin  string   // the binary; empty = Binary(t)
	Addr string   // --addr; empty = 127.0.0.1 on a port the system picks
	Args []string // after `serve --addr …` (--config, --data-dir, …)
	Env  []string // the whole environment, e.g. CleanEnv(…)
	// ReadyTimeout bounds each start's wait for GET /readyz; 0 = 60s.
	ReadyTimeout time.Duration
}

// Process is one `agentgate serve` and its restarts.
type Process struct {
	Out *Buffer // stdout and stderr of every start

	t    testing.TB
	opts Options

	mu      sync.Mutex
	addr    string // what the next start passes to --addr
	base    string
	starts  int
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
}

// New prepares a process; Start runs it.
func New(t testing.TB, o Options) *Process {
	t.Helper()
	if o.Bin == "" {
		o.Bin = Binary(t)
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	return &Process{Out: &Buffer{}, t: t, opts: o, addr: o.Addr}
}

// Base is http://127.0.0.1:port of the last start.
func (p *Process) Base() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.base
}

// Pid is the process id of the last start.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Start runs serve and waits until GET /readyz on the address it printed
// answers 200. A restart that finds its address taken by another process
// moves to a free port once.
func (p *Process) Start() error {
	err := p.start()
	if err != nil && p.boundElsewhere() {
		p.mu.Lock()
		host, _, _ := net.SplitHostPort(p.addr)
		p.addr = net.JoinHostPort(host, "0")
		p.mu.Unlock()
		err = p.start()
	}
	return err
}

// boundElsewhere reports whether the last start failed because its address
// was in use.
func (p *Process) boundElsewhere() bool {
	out := p.Out.String()
	if i := strings.LastIndex(out, "----- start "); i >= 0 {
		out = out[i:]
	}
	return strings.Contains(out, "address already in use")
}

const listening = "agentgate listening on http://"

func (p *Process) start() error {
	p.mu.Lock()
	p.starts++
	start := p.starts
	args := append([]string{"serve", "--addr", p.addr}, p.opts.Args...)
	fmt.Fprintf(p.Out, "----- start %d: agentgate %s\n", start, strings.Join(args, " "))
	cmd := exec.Command(p.opts.Bin, args...)
	cmd.Env = p.opts.Env
	addrc := make(chan string, 1)
	w := &addrWatch{to: p.Out, found: addrc}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("start agentgate: %w", err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.exitErr = cmd, exited, nil
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		fmt.Fprintf(p.Out, "----- exited: %v\n", err)
		close(exited)
	}()

	deadline := time.NewTimer(p.opts.ReadyTimeout)
	defer deadline.Stop()
	var listen string
	select {
	case listen = <-addrc:
	case <-exited:
		return fmt.Errorf("agentgate exited before it listened:\n%s", p.Out.String())
	case <-deadline.C:
		return fmt.Errorf("agentgate printed no %q line within %s:\n%s", listening, p.opts.ReadyTimeout, p.Out.String())
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("agentgate printed %q: %v", listen, err)
	}
	p.mu.Lock()
	p.addr = net.JoinHostPort(hostOf(p.addr, host), port)
	p.base = "http://127.0.0.1:" + port
	base := p.base
	p.mu.Unlock()

	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := readyClient.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("agentgate exited before it was ready:\n%s", p.Out.String())
		case <-deadline.C:
			return fmt.Errorf("agentgate not ready after %s (last: %v):\n%s", p.opts.ReadyTimeout, err, p.Out.String())
		case <-tick.C:
		}
	}
}

// hostOf keeps the host the caller asked for (0.0.0.0 stays 0.0.0.0).
func hostOf(asked, printed string) string {
	if h, _, err := net.SplitHostPort(asked); err == nil && h != "" {
		return h
	}
	return printed
}

var readyClient = &http.Client{Timeout: 5 * time.Second}

// Kill sends SIGKILL (a crash) and waits for the process to be gone.
func (p *Process) Kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Kill()
	<-exited
}

// ErrStillRunning is what Terminate returns when the process outlived its
// limit; it was then sent SIGQUIT, so Out holds every goroutine's stack.
var ErrStillRunning = errors.New("still running")

// Terminate sends SIGTERM and waits up to limit for the exit. It returns the
// exit error (nil = exit 0) and how long the exit took.
func (p *Process) Terminate(limit time.Duration) (error, time.Duration) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err, 0
	}
	select {
	case <-exited:
	case <-time.After(limit):
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
		return ErrStillRunning, time.Since(start)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr, time.Since(start)
}

// addrWatch copies output to a buffer and reports the address of the first
// "agentgate listening on" line.
type addrWatch struct {
	to    *Buffer
	found chan string
	line  []byte
	done  bool
}

func (w *addrWatch) Write(b []byte) (int, error) {
	n, err := w.to.Write(b)
	if w.done {
		return n, err
	}
	w.line = append(w.line, b...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		line := string(w.line[:i])
		w.line = w.line[i+1:]
		if addr, ok := strings.CutPrefix(line, listening); ok {
			w.done, w.line = true, nil
			w.found <- strings.TrimSpace(addr)
			break
		}
	}
	return n, err
}
