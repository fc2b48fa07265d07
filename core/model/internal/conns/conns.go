// Package conns gives the model clients their HTTP client: one that keeps a
// connection for each call in flight to a model server.
package conns

import (
	"net/http"
	"time"
)

// MaxIdlePerHost is how many idle connections to one model server a model
// keeps: as many runs as server.workers may advance at once (1024), so
// workers calling a model in parallel reuse their connections. Go's default
// keeps 2; a third call's connection was closed after its answer and dialled
// (over TLS: handshaken) again for the next one. Idle connections still close
// after the transport's 90 s.
const MaxIdlePerHost = 1024

// Client returns a client over a clone of http.DefaultTransport (its proxy
// from the environment, timeouts and HTTP/2; the same settings when a
// program replaced it with a wrapper) that keeps up to MaxIdlePerHost idle
// connections per host.
func Client() *http.Client {
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		base = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true,
			IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second,
			ExpectContinueTimeout: time.Second}
	}
	t := base.Clone()
	t.MaxIdleConns = 0 // no limit over all hosts; the per-host one holds
	t.MaxIdleConnsPerHost = MaxIdlePerHost
	return &http.Client{Transport: t}
}
