package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// capListener holds at most max connections open at once. One more is
// accepted, told 503 (so a client sees why, instead of waiting in the
// kernel's backlog), and closed; the count frees as connections close.
type capListener struct {
	net.Listener
	slots    chan struct{}
	refusing chan struct{}
	log      *slog.Logger
	refused  atomic.Int64
	warned   atomic.Int64 // unix seconds of the last warning
}

func limitConnections(ln net.Listener, max int, log *slog.Logger) *capListener {
	return &capListener{Listener: ln, slots: make(chan struct{}, max), refusing: make(chan struct{}, maxRefusing), log: log}
}

const busyBody = `{"error":{"code":"unavailable","message":"the gateway has server.max_connections connections open; retry in a moment"}}`

var busyResponse = fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"+
	"Retry-After: 1\r\nContent-Length: %d\r\n\r\n%s", len(busyBody), busyBody)

// maxRefusing bounds the refusals being answered at once; past it a
// connection over the cap is closed without an answer.
const maxRefusing = 64

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, free: func() { <-l.slots }}, nil
		default:
			select {
			case l.refusing <- struct{}{}:
				go l.refuse(c)
			default:
				_ = c.Close()
				l.refused.Add(1)
			}
		}
	}
}

// refuse answers a connection over the cap and closes it, warning at most
// once a minute. It reads what the client sent first (for at most a
// second), so closing does not reset the connection before the answer
// is read.
func (l *capListener) refuse(c net.Conn) {
	defer func() { <-l.refusing }()
	n := l.refused.Add(1)
	_ = c.SetDeadline(time.Now().Add(time.Second))
	_, _ = c.Read(make([]byte, 4096))
	_, _ = c.Write([]byte(busyResponse))
	_ = c.Close()
	if now := time.Now().Unix(); now-l.warned.Load() >= 60 {
		l.warned.Store(now)
		l.log.Warn("connection refused: server.max_connections reached", "max", cap(l.slots), "refused_total", n)
	}
}

// slotConn frees its slot once, on its first Close.
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
