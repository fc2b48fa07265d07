package gateway

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// bodyTimeout is how long a request's body may take to arrive, from the
// end of its headers to its last byte.
const bodyTimeout = 15 * time.Second

// bodyDeadline cuts a request whose body does not arrive within d: the
// connection's read deadline is set for it and lifted once the handler has
// read the body to its end. Without it a client that declares a body and
// sends a byte now and then holds a connection for ever, with no key: a
// handler that refuses the request (401) does not read the body, but the
// server reads what is left of it before answering, to keep the connection.
// Lifting the deadline matters: once a body is read the server watches the
// connection for the client going away, and a deadline passing then would
// end an event stream, a ?wait=true run or an MCP approval prompt that is
// still answering. A request without a body gets no deadline.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(d)) == nil {
			r.Body = &liftAtEOF{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
		h.ServeHTTP(w, r)
	})
}

// liftAtEOF calls lift once when its body has been read to the end.
type liftAtEOF struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *liftAtEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}
