package egress_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core/egress"
)

func policy(t *testing.T, allow ...string) *egress.Policy {
	t.Helper()
	p, err := egress.New(allow)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAllowedIP(t *testing.T) {
	t.Parallel()
	deny := []string{
		"127.0.0.1", "127.1.2.3", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "169.254.0.1",
		"100.64.0.1", "100.100.100.200", "0.0.0.0", "0.1.2.3", "255.255.255.255", "224.0.0.1", "239.1.1.1",
		"::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "fd00:ec2::254", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1",
		"2002:7f00:1::1",          // 6to4 of 127.0.0.1
		"64:ff9b::a9fe:a9fe",      // NAT64 of 169.254.169.254
		"fe80::1%eth0",            // zoned link-local
		"2001:0:4136:e378::1",     // Teredo
		"64:ff9b:1::a00:1",        // local-use NAT64
		"198.18.0.1", "240.0.0.1", // benchmarking, reserved
	}
	allow := []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"}
	var nilPolicy *egress.Policy
	for _, p := range []*egress.Policy{nilPolicy, policy(t)} {
		for _, s := range deny {
			if p.AllowedIP(netip.MustParseAddr(s)) {
				t.Errorf("default policy allows %s", s)
			}
		}
		for _, s := range allow {
			if !p.AllowedIP(netip.MustParseAddr(s)) {
				t.Errorf("default policy refuses public %s", s)
			}
		}
	}
	if nilPolicy.AllowedIP(netip.Addr{}) {
		t.Error("the zero address is allowed")
	}

	p := policy(t, "10.1.0.0/16", "127.0.0.1", "fd00::/8", " 192.168.7.7 ", "hooks.Internal.")
	for _, tc := range []struct {
		ip   string
		want bool
	}{
		{"10.1.2.3", true}, {"10.2.0.1", false}, {"127.0.0.1", true}, {"::ffff:127.0.0.1", true},
		{"127.0.0.2", false}, {"fd12::1", true}, {"fc00::1", false}, {"192.168.7.7", true},
		{"192.168.7.8", false}, {"169.254.169.254", false},
	} {
		if got := p.AllowedIP(netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("allow 10.1.0.0/16, 127.0.0.1, fd00::/8: AllowedIP(%s) = %t, want %t", tc.ip, got, tc.want)
		}
	}
	if !p.AllowedHost("HOOKS.internal") || !p.AllowedHost("hooks.internal.") || p.AllowedHost("evil.hooks.internal") {
		t.Error("host name entries must allow that exact name only, case-insensitively")
	}
}

func TestNewRejectsBadEntries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ entry, want string }{
		{"10.0.0.0/33", "not a CIDR"},
		{"10.0.0/8", "not a CIDR"},
		{"https://hooks.example.com/x", "is a URL"},
		{"hooks.example.com:8080", "not a CIDR, an IP or a host name"},
		{"*.example.com", "wildcards"},
		{"", "empty"},
		{"a b", "not a CIDR, an IP or a host name"},
		{"fe80::1%eth0", "zone"},
	} {
		t.Run(tc.entry, func(t *testing.T) {
			_, err := egress.New([]string{"10.0.0.0/8", tc.entry})
			if err == nil || !strings.Contains(err.Error(), "allow[1]") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(%q) = %v, want an error naming allow[1] and %q", tc.entry, err, tc.want)
			}
			if egress.CheckEntry(tc.entry) == nil {
				t.Errorf("CheckEntry(%q) = nil", tc.entry)
			}
		})
	}
	for _, ok := range []string{"10.1.0.0/16", "10.1.2.3/16", "::1", "fd00::/8", "127.0.0.1", "hooks.internal", "localhost", "my_host-1.example.com."} {
		if err := egress.CheckEntry(ok); err != nil {
			t.Errorf("CheckEntry(%q) = %v", ok, err)
		}
	}
}

// server counts the requests that reach it.
type server struct {
	*httptest.Server
	hits atomic.Int32
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, c *http.Client, url string) error {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

func TestClientChecksAtDialTime(t *testing.T) {
	t.Parallel()
	srv := newServer(t, nil)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	byName := "http://localhost:" + port + "/"

	for _, tc := range []struct {
		name  string
		allow []string
		url   string
		ok    bool
	}{
		{"loopback IP, default", nil, srv.URL, false},
		{"loopback name, default", nil, byName, false}, // the name resolves to a denied IP
		{"allowed IP", []string{"127.0.0.1"}, srv.URL, true},
		{"allowed CIDR", []string{"127.0.0.0/8"}, srv.URL, true},
		{"allowed IP, reached by name", []string{"127.0.0.1"}, byName, true},
		{"allowed name", []string{"localhost"}, byName, true},
		{"other IP allowed", []string{"10.0.0.0/8", "127.0.0.2"}, srv.URL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.hits.Load()
			err := get(t, policy(t, tc.allow...).Client(10*time.Second), tc.url)
			reached := srv.hits.Load() > before
			if tc.ok {
				if err != nil || !reached {
					t.Fatalf("GET %s with allow %v: %v (reached %t); want it delivered", tc.url, tc.allow, err, reached)
				}
				return
			}
			if !errors.Is(err, egress.ErrDenied) || reached {
				t.Fatalf("GET %s with allow %v: %v (reached %t); want ErrDenied and nothing sent", tc.url, tc.allow, err, reached)
			}
		})
	}
}

// The metadata address is refused by the dialer's check, which runs before
// connect(2): the error is the policy's, not a timeout or "unreachable".
func TestMetadataRefusedBeforeConnecting(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/latest/meta-data/", "http://[::ffff:169.254.169.254]/"} {
		err := get(t, policy(t).Client(time.Minute), url)
		var de *egress.DeniedError
		if !errors.As(err, &de) || !errors.Is(err, egress.ErrDenied) {
			t.Fatalf("GET %s: %v; want a *DeniedError", url, err)
		}
		if strings.Contains(de.Error(), "/latest") || !strings.Contains(de.Error(), "egress.allow") {
			t.Errorf("denied error %q: want the host only and what to do", de.Error())
		}
	}
}

func TestRedirects(t *testing.T) {
	t.Parallel()
	// A second loopback address stands for an internal service: only
	// 127.0.0.1 is allowed.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no second loopback address: %v", err)
	}
	var internalHits atomic.Int32
	internal := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		internalHits.Add(1)
	})}}
	internal.Start()
	t.Cleanup(internal.Close)

	toInternal := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, internal.URL+"/secret", http.StatusTemporaryRedirect)
	})
	toMetadata := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	var loop *server
	loop = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, loop.URL+"/again", http.StatusFound)
	})
	c := policy(t, "127.0.0.1").Client(10 * time.Second)

	if err := get(t, c, toInternal.URL); !errors.Is(err, egress.ErrDenied) || internalHits.Load() != 0 || toInternal.hits.Load() != 1 {
		t.Errorf("redirect to a denied address: %v, internal reached %d times; want ErrDenied and nothing sent", err, internalHits.Load())
	}
	if err := get(t, c, toMetadata.URL); !errors.Is(err, egress.ErrDenied) {
		t.Errorf("redirect to the metadata address: %v, want ErrDenied", err)
	}
	if err := get(t, c, loop.URL); err == nil || !strings.Contains(err.Error(), "stopped after 5 redirects") || loop.hits.Load() != 1+egress.MaxRedirects {
		t.Errorf("redirect loop: %v after %d requests; want a stop after %d redirects", err, loop.hits.Load(), egress.MaxRedirects)
	}

	// https → http is refused even when both are allowed.
	plain := newServer(t, nil)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL, http.StatusFound)
	}))
	t.Cleanup(tlsSrv.Close)
	tc := policy(t, "127.0.0.1").Client(10 * time.Second)
	tc.Transport.(*http.Transport).TLSClientConfig = tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig
	if err := get(t, tc, tlsSrv.URL); err == nil || !strings.Contains(err.Error(), "https to http") || plain.hits.Load() != 0 {
		t.Errorf("https → http redirect: %v, plain reached %d times; want it refused", err, plain.hits.Load())
	}
}

// A proxy from the environment would make the connection for the client,
// unchecked: the client uses none.
func TestClientIgnoresEnvironmentProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://203.0.113.1:3128")
	t.Setenv("HTTPS_PROXY", "http://203.0.113.1:3128")
	if tr := policy(t).Client(time.Second).Transport.(*http.Transport); tr.Proxy != nil {
		t.Error("the client's transport has a proxy")
	}
}

func FuzzCheckEntry(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "::1", "hooks.internal", "http://x", "*.x", "a:1", "", "fe80::1%lo", "1.2.3.4/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := egress.CheckEntry(s)
		if _, nerr := egress.New([]string{s}); (err == nil) != (nerr == nil) {
			t.Fatalf("CheckEntry(%q) = %v but New = %v", s, err, nerr)
		}
	})
}

// CheckHost refuses, before anything is dialled, what the URL itself shows
// to be internal; names are left to the dial-time check.
func TestCheckHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		host  string
		allow []string
		ok    bool
	}{
		{"169.254.169.254", nil, false},
		{"127.0.0.1", nil, false},
		{"[::1]", nil, false},
		{"::ffff:10.0.0.1", nil, false},
		{"10.0.0.1", nil, false},
		{"localhost", nil, false},
		{"api.LOCALHOST.", nil, false},
		{"93.184.215.14", nil, true},
		{"hooks.example.com", nil, true}, // resolved and checked when dialled
		{"127.0.0.1", []string{"127.0.0.0/8"}, true},
		{"localhost", []string{"127.0.0.1"}, true},
		{"localhost", []string{"localhost"}, true},
		{"10.0.0.1", []string{"127.0.0.1"}, false},
	} {
		err := policy(t, tc.allow...).CheckHost(tc.host)
		if tc.ok && err != nil || !tc.ok && !errors.Is(err, egress.ErrDenied) {
			t.Errorf("CheckHost(%q) with allow %v = %v; want ok=%t", tc.host, tc.allow, err, tc.ok)
		}
	}
}
