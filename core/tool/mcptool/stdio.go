package mcptool

import (
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// startStdio starts cmd and returns a transport over its stdin and stdout.
// mcp-go's own stdio transport reads each line of the server's output
// whole, however long; here a line (one message) over max bytes ends the
// output instead, after over is called: its stdout is closed, so a server
// blocked writing the rest of it fails and exits rather than waiting to be
// killed. stop ends the process.
func startStdio(cmd *exec.Cmd, max int64, over func(), log *slog.Logger) (*transport.Stdio, *stdioProc, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start command: %w", err)
	}
	p := &stdioProc{cmd: cmd, stdout: stdout}
	tr := transport.NewIO(&lineLimit{r: stdout, max: max, over: func() { _ = stdout.Close(); over() }}, stdin, nil)
	transport.WithCommandLogger(log)(tr)
	return tr, p, nil
}

// Stopping a server: after its stdin is closed, it has stopGrace to exit,
// then stopGrace after SIGTERM, then it is killed.
const stopGrace = 2 * time.Second

// stdioProc is a server process startStdio started.
type stdioProc struct {
	cmd    *exec.Cmd
	stdout io.Closer
}

// stop waits for the process to exit once its stdin is closed (the
// transport's Close), and returns how it exited. If it has not after
// stopGrace, its stdout is closed too (nobody reads it any more, and a
// server blocked writing to it would not see its stdin end) and it gets
// SIGTERM; after stopGrace more, SIGKILL.
func (p *stdioProc) stop() error {
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case err := <-exited:
			return err
		case <-time.After(stopGrace):
			_ = p.stdout.Close()
			_ = p.cmd.Process.Signal(sig)
		}
	}
	return <-exited
}

// lineLimit reads r until a line goes over max bytes; it then calls over
// and ends with io.EOF, so that the transport ends the session.
type lineLimit struct {
	r    io.Reader
	max  int64
	line int64
	over func()
	done bool
}

func (l *lineLimit) Read(p []byte) (int, error) {
	if l.done {
		return 0, io.EOF
	}
	n, err := l.r.Read(p)
	for i, c := range p[:n] {
		if c == '\n' {
			l.line = 0
			continue
		}
		if l.line++; l.line > l.max {
			l.done = true
			l.over()
			return i, io.EOF
		}
	}
	return n, err
}
