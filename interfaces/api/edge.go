package api

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// edge refuses, before any key is looked at, what a web page the user
// visits could make a browser send to the API (the same rules /mcp has):
//
//   - a Host that is not served here (421): with no API keys only the
//     loopback names, plus server.allowed_hosts; with keys any Host unless
//     allowed_hosts is set. This stops DNS rebinding, where a page's own
//     name resolves to 127.0.0.1;
//   - a cross-site request that changes state (403), told by the browser's
//     Sec-Fetch-Site or an Origin that is not the Host (http's
//     CrossOriginProtection); server.trusted_origins lists exceptions;
//   - a state-changing request with a body that is not JSON (415): a form
//     or text/plain POST, which a page may send without asking;
//   - with no API keys, a request a proxy or tunnel forwarded (403): without
//     keys every caller is an admin, and a proxy on this machine (ngrok, a
//     tunnel for a webhook) would give that to whoever reaches it. The
//     platforms' webhooks are not behind edge: they carry signatures.
func (s *server) edge(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	for _, o := range s.cfg.TrustedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			s.log.Warn("server.trusted_origins: ignored", "origin", o, "err", err)
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross_site", "cross-site requests may not change anything here; "+
			"call the API from a program, or list the page's origin in server.trusted_origins")
	}))
	checked := cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if changesState(r.Method) && !jsonBody(r) {
			writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type",
				"send the body as JSON with 'Content-Type: application/json'")
			return
		}
		next.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			msg := "Host " + quote(r.Host) + " is not served here: use localhost, or list the name in server.allowed_hosts"
			if len(s.cfg.Keys) == 0 {
				msg = "Host " + quote(r.Host) + " is not served here: without API keys only localhost is; " +
					"to serve other names set API keys (AGENTGATE_API_KEYS) and list them in server.allowed_hosts"
			}
			writeError(w, http.StatusMisdirectedRequest, "host_not_allowed", msg)
			return
		}
		if h := forwardedBy(r); h != "" && len(s.cfg.Keys) == 0 {
			writeError(w, http.StatusForbidden, "proxied", "this gateway has no API keys, so it serves programs on this machine only, "+
				"and this request came through a proxy or tunnel (it carries "+h+"); set API keys (AGENTGATE_API_KEYS or server.api_keys) to serve it")
			return
		}
		checked.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether the API answers requests for host (a Host
// header, with or without a port).
func (s *server) hostAllowed(host string) bool {
	name, _, err := net.SplitHostPort(host)
	if err != nil {
		name = strings.Trim(host, "[]")
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if len(s.cfg.AllowedHosts) == 0 && len(s.cfg.Keys) > 0 {
		return true
	}
	if LoopbackName(name) {
		return true
	}
	for _, h := range s.cfg.AllowedHosts {
		if strings.EqualFold(strings.TrimSuffix(h, "."), name) {
			return true
		}
	}
	return false
}

// LoopbackName reports whether host name (no port; any case, a trailing
// dot) names this machine: localhost, *.localhost or a loopback address.
func LoopbackName(name string) bool {
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(name)
	return err == nil && ip.IsLoopback()
}

// forwardedBy names the header that says a proxy forwarded r, "" when
// none does. Tunnels and most proxies (Caddy, Traefik, Apache, ngrok,
// cloudflared) add one of them by default.
func forwardedBy(r *http.Request) string {
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip", "Via"} {
		if r.Header.Get(h) != "" {
			return h
		}
	}
	return ""
}

func changesState(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// jsonBody reports whether r's body is JSON, or absent with no type.
func jsonBody(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return r.ContentLength == 0 && len(r.TransferEncoding) == 0
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// quote shows a header value in an error message, cut to 100 bytes.
func quote(v string) string {
	if len(v) > 100 {
		v = v[:100] + "…"
	}
	return `"` + strings.ToValidUTF8(v, "?") + `"`
}
