package slacktest

import "net/http"

// socketPath is where the fake's Socket Mode websocket listens
// (apps.connections.open answers its ws:// URL).
const socketPath = "/socket"

// serveSocket is the Socket Mode websocket endpoint.
func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "socket mode is not implemented by the fake yet", http.StatusNotImplemented)
}
