package mcptool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync/atomic"

	"github.com/agentgate/agentgate/core"
)

// MaxMessageBytes bounds what is read of one message from a server: a line
// of a process's output, a JSON response, or one event of an event stream. A tool
// result over it is a *core.ToolError and is not read further. It leaves
// room for MaxFilesBytes of images in base64 with MaxContent of text; what
// goes past those limits is dropped anyway.
const MaxMessageBytes = 64 << 20

// errTooLarge ends the reading of a message over the limit.
var errTooLarge = errors.New("message too large")

type tooLargeKey struct{}

// watchTooLarge returns ctx with a flag that is set when a response to a
// request made with it goes over the limit.
func watchTooLarge(ctx context.Context) (context.Context, *atomic.Bool) {
	flag := new(atomic.Bool)
	return context.WithValue(ctx, tooLargeKey{}, flag), flag
}

// tooLargeError is the error of a call whose result went over the limit:
// retrying would get the same.
func tooLargeError(t *tool, limit int64) error {
	return &core.ToolError{Message: fmt.Sprintf("tool %s of server %s returned a result larger than %s; it was not read",
		t.name, t.s.name, core.ByteSize(limit))}
}

// limitTransport is an http.RoundTripper whose response bodies end with
// errTooLarge once one message goes over max bytes. In an event stream,
// each event (ended by a blank line) is a message, so a long-lived stream
// is not cut, only an oversized event.
type limitTransport struct {
	next http.RoundTripper
	max  int64
}

func (l *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	flag, _ := req.Context().Value(tooLargeKey{}).(*atomic.Bool)
	resp.Body = &limitedBody{ReadCloser: resp.Body, max: l.max, events: mt == "text/event-stream", flag: flag}
	return resp, nil
}

// limitedBody counts the bytes of the message being read.
type limitedBody struct {
	io.ReadCloser
	max    int64
	events bool         // an event stream: a blank line starts a new message
	flag   *atomic.Bool // set when over the limit; may be nil
	n      int64        // bytes of the message so far
	line   int64        // bytes of the line so far, not counting '\r'
	err    error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	if !b.events {
		if b.n+int64(n) > b.max {
			return b.over(int(b.max - b.n))
		}
		b.n += int64(n)
		return n, err
	}
	// Lines as mcp-go reads them: split at '\n', a line of only '\r' is
	// blank.
	for i, c := range p[:n] {
		if b.n++; b.n > b.max {
			return b.over(i)
		}
		switch c {
		case '\n':
			if b.line == 0 {
				b.n = 0
			}
			b.line = 0
		case '\r':
		default:
			b.line++
		}
	}
	return n, err
}

// over ends the body after its first n bytes of this read.
func (b *limitedBody) over(n int) (int, error) {
	b.err = fmt.Errorf("%w: over %s", errTooLarge, core.ByteSize(b.max))
	if b.flag != nil {
		b.flag.Store(true)
	}
	return n, b.err
}
