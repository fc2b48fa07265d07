package mcp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/server"

	"github.com/agentgate/agentgate/interfaces/api"
)

// MCP sessions (protocol versions before 2026-07-28) belong to the API key
// that opened them. A session id is "mcp-session-<random>.<tag>", the tag
// a hash of the key's principal; a request with a session id whose tag is
// not its own key's gets 404, as for an unknown session. Without it a key
// that learned another's session id (a log, a proxy) could answer that
// session's elicitations — deciding an approval recorded as the other
// key's — or read its notifications.

// sessionPrefix starts every session id, as mcp-go's own do.
const sessionPrefix = "mcp-session-"

var errNotYourSession = errors.New("mcp: session id not issued to this API key")

// keyTag is the tag of the sessions of the request's key.
func keyTag(ctx context.Context) string {
	p, _ := api.PrincipalFrom(ctx)
	sum := sha256.Sum256([]byte("agentgate mcp session\x00" + p.ID))
	return hex.EncodeToString(sum[:12])
}

// ownsSession reports whether session id was issued to the key of tag.
func ownsSession(id, tag string) bool {
	random, got, ok := strings.Cut(strings.TrimPrefix(id, sessionPrefix), ".")
	return ok && strings.HasPrefix(id, sessionPrefix) && len(random) == 26 && got == tag // 26: rand.Text
}

// keySessions issues and checks the session ids of one key.
type keySessions struct{ tag string }

func (k keySessions) Generate() string {
	return sessionPrefix + rand.Text() + "." + k.tag
}

func (k keySessions) Validate(id string) (bool, error) {
	if !ownsSession(id, k.tag) {
		return false, errNotYourSession
	}
	return false, nil
}

// Terminate implements server.SessionIdManager: nothing is kept per
// session.
func (keySessions) Terminate(string) (bool, error) { return false, nil }

// keySessionIDs resolves a request to its key's session ids.
type keySessionIDs struct{}

func (keySessionIDs) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r == nil { // the idle-session sweeper: it only terminates
		return keySessions{}
	}
	return keySessions{tag: keyTag(r.Context())}
}

// ownSessionsOnly refuses a request carrying another key's session id,
// whatever its method: mcp-go checks the id of a POST but attaches a GET
// (the notification stream) to any id it is given.
func ownSessionsOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(server.HeaderKeySessionID); id != "" && !ownsSession(id, keyTag(r.Context())) {
			http.Error(w, "Session not found: it was opened with another API key, or not by this server", http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}
