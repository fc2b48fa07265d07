package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/time/rate"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
)

// Key is one accepted bearer key: its secret, the name it acts as
// (key:<name>), its role and the agents it is limited to (empty = all).
type Key struct {
	Name   string
	Secret string
	Role   approval.Role
	Agents []string
}

// KeyName names a key without revealing it: "env-" and the first 8 hex
// digits of its SHA-256 (`printf %s "$KEY" | sha256sum | cut -c1-8`), for
// keys that come without a name (AGENTGATE_API_KEYS).
func KeyName(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "env-" + hex.EncodeToString(sum[:4])
}

// LocalName is the key name of every caller when no keys are configured
// (the API is open on loopback): key:local, an admin.
const LocalName = "local"

type principalKey struct{}

// WithPrincipal returns ctx carrying p (for handlers mounted elsewhere and
// for tests).
func WithPrincipal(ctx context.Context, p approval.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom is who sent an authenticated request: its API key, or
// key:local (admin) when the API is open. ok is false outside a request
// that passed the auth middleware.
func PrincipalFrom(ctx context.Context) (p approval.Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(approval.Principal)
	return p, ok
}

// cliAgent is the User-Agent prefix of the agentgate CLI: its requests are
// recorded with the route cli. The route is a label; who acted is the key.
const cliAgent = "agentgate-cli/"

func route(r *http.Request) string {
	if strings.HasPrefix(r.UserAgent(), cliAgent) {
		return approval.RouteCLI
	}
	return approval.RouteAPI
}

// auth finds the request's key (compared in constant time against every
// key) and passes its principal on; a missing or unknown key gets 401 and
// an audit entry (at most a few a second, so a flood cannot fill the log).
func (s *server) auth(next http.Handler) http.Handler {
	if len(s.cfg.Keys) == 0 {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := approval.KeyPrincipal(LocalName, approval.RoleAdmin, nil, route(r))
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k, ok := s.key(r); ok {
			p := approval.KeyPrincipal(k.Name, k.Role, k.Agents, route(r))
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
			return
		}
		detail := "no key"
		if r.Header.Get("Authorization") != "" {
			detail = "unknown key"
		}
		s.refusedKey(r, detail)
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentgate"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "send a valid API key as 'Authorization: Bearer <key>'")
	})
}

// key returns the configured key r's bearer token is, comparing it with
// every key in constant time.
func (s *server) key(r *http.Request) (Key, bool) {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return Key{}, false
	}
	found := -1
	for i, k := range s.cfg.Keys {
		if subtle.ConstantTimeCompare([]byte(got), []byte(k.Secret)) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Key{}, false
	}
	return s.cfg.Keys[found], true
}

// refusals bounds the audit entries of refused keys.
type refusals struct {
	once    sync.Once
	limit   *rate.Limiter
	mu      sync.Mutex
	dropped int
}

func (s *server) refusedKey(r *http.Request, detail string) {
	s.refused.once.Do(func() { s.refused.limit = rate.NewLimiter(5, 20) })
	s.refused.mu.Lock()
	if !s.refused.limit.Allow() {
		s.refused.dropped++
		s.refused.mu.Unlock()
		return
	}
	if n := s.refused.dropped; n > 0 {
		detail += fmt.Sprintf(" (and %d more refused since the last entry)", n)
		s.refused.dropped = 0
	}
	s.refused.mu.Unlock()
	s.audit(r.Context(), core.AuditEntry{Route: route(r), Action: core.AuditKeyRefused, Target: r.Method + " " + r.URL.Path,
		Outcome: core.AuditDenied, Detail: detail + " from " + r.RemoteAddr})
}

// audit appends e to the audit log (the store fills in its time and the
// outcome ok); a failure is logged (the request's outcome does not depend
// on it).
func (s *server) audit(ctx context.Context, e core.AuditEntry) {
	if s.cfg.Store == nil {
		return
	}
	if err := s.cfg.Store.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		s.log.Error("audit log", "action", e.Action, "target", e.Target, "err", err)
	}
}

// need wraps h so that only principals with at least role reach it; others
// get 403 and an audit entry.
func (s *server) need(role approval.Role, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, _ := PrincipalFrom(r.Context())
		if p.Role < role {
			s.forbidden(w, r, p, fmt.Sprintf("the key's role %s may not do this; it needs %s or above", p.Role, role))
			return
		}
		h(w, r)
	}
}

// allAgents lets only keys not limited to some agents through: the audit
// log and the job queue span every agent (run ids, reply text, arguments).
func (s *server) allAgents(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if p, _ := PrincipalFrom(r.Context()); len(p.Agents) > 0 {
			s.forbidden(w, r, p, "the audit log and the jobs span every agent; the key is limited to "+strings.Join(p.Agents, ", "))
			return
		}
		h(w, r)
	}
}

// forbidden answers 403 and audits the refusal.
func (s *server) forbidden(w http.ResponseWriter, r *http.Request, p approval.Principal, why string) {
	// The target is the approval, run or routine the path names, so a
	// filter on it finds the refusals too; the request is in the detail.
	target := r.PathValue("id")
	if target == "" {
		target = r.Method + " " + r.URL.Path
	}
	s.audit(r.Context(), core.AuditEntry{Principal: p.ID, Route: p.Route, Action: core.AuditForbidden,
		Target: target, Outcome: core.AuditDenied, Detail: r.Method + " " + r.URL.Path + ": " + why})
	writeError(w, http.StatusForbidden, "forbidden", why)
}

// agentAllowed answers 403 when the caller's key is limited to other
// agents than agent.
func (s *server) agentAllowed(w http.ResponseWriter, r *http.Request, agent string) bool {
	p, _ := PrincipalFrom(r.Context())
	if p.MayUseAgent(agent) {
		return true
	}
	s.forbidden(w, r, p, fmt.Sprintf("the key is limited to other agents than %s", agent))
	return false
}

func caller(r *http.Request) approval.Principal {
	p, _ := PrincipalFrom(r.Context())
	return p
}
