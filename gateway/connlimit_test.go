package gateway

import (
	"bufio"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// get sends GET /healthz on its own connection and returns the status
// line and the connection (left open).
func rawGet(t *testing.T, addr string) (string, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
	return resp.Status + " " + body.String(), c
}

func TestConnectionsOverTheCapAreToldAndClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })}
	go srv.Serve(limitConnections(ln, 2, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	var held []net.Conn
	for range 2 { // keep-alive connections stay open after their answer
		status, c := rawGet(t, addr)
		if !strings.HasPrefix(status, "200") {
			t.Fatalf("within the cap: %s", status)
		}
		held = append(held, c)
	}
	status, c := rawGet(t, addr)
	if !strings.HasPrefix(status, "503") || !strings.Contains(status, "server.max_connections") {
		t.Fatalf("over the cap: %q, want 503 naming server.max_connections", status)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the refused connection stayed open")
	}
	c.Close()

	held[0].Close() // frees a slot
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, c := rawGet(t, addr)
		c.Close()
		if strings.HasPrefix(status, "200") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed connection's slot was not freed: %s", status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	held[1].Close()
}
