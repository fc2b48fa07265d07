package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A client that declares a body and trickles it, with no key, is cut once
// the body's time is up: the refusal (401, the body never read) reaches it
// and the connection closes, instead of the server waiting for the rest.
func TestBodyDeadlineCutsATrickledBody(t *testing.T) {
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no key", http.StatusUnauthorized)
	})
	srv := httptest.NewServer(bodyDeadline(refuse, 100*time.Millisecond))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /api/v1/approvals/apr_x/decision HTTP/1.1\r\nHost: localhost\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	// Without the deadline nothing comes back until the other 999 bytes
	// do: fail after 20 s rather than wait for ever.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", resp.StatusCode)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the connection after the refusal: %v, want it closed", err)
	}
}

// Once its body is read, a request may answer for as long as it needs (an
// event stream, ?wait=true): the body's deadline neither ends it nor
// cancels its context.
func TestBodyDeadlineLiftedOnceTheBodyIsRead(t *testing.T) {
	const d = 100 * time.Millisecond
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
		for range 5 { // five times the deadline, writing as a stream does
			select {
			case <-r.Context().Done():
				return
			case <-time.After(d):
			}
			_, _ = io.WriteString(w, string(body)+"\n")
			http.NewResponseController(w).Flush()
		}
	})
	srv := httptest.NewServer(bodyDeadline(slow, d))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || strings.Count(string(got), `{"input":"hi"}`) != 5 {
		t.Fatalf("streamed answer %q, %v; want all five lines", got, err)
	}
}
