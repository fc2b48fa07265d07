// Package egress decides where the gateway may open connections to on
// behalf of destinations it did not get from the operator: a webhook URL
// sent through the API. By default those may reach the public internet
// only: loopback, private, link-local (cloud metadata), CGNAT, multicast and
// reserved addresses are refused. The operator widens that with
// egress.allow in the config file.
//
// The check runs when a connection is dialled, on the IP actually dialled
// (after DNS), so a name that resolves to an internal address, a name that
// changes its answer between checks (DNS rebinding) and every redirect hop
// are covered alike.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrDenied is matched (errors.Is) by every *DeniedError.
var ErrDenied = errors.New("egress: destination not allowed")

// DeniedError says that a connection was refused by the policy before it was
// attempted. Its text names the host and IP: log it, never show it to
// whoever chose the destination (it would tell them what the host resolves
// to).
type DeniedError struct {
	// Host is the host name or IP that was dialled ("" when unknown).
	Host string
	// IP is the address the policy refused.
	IP netip.Addr
}

func (e *DeniedError) Error() string {
	if e.Host == "" || e.Host == e.IP.String() {
		return fmt.Sprintf("egress: %s is not allowed (an internal or reserved address); list it under egress.allow in the config file to allow it", e.IP)
	}
	return fmt.Sprintf("egress: %s (%s) is not allowed (an internal or reserved address); list it under egress.allow in the config file to allow it", e.Host, e.IP)
}

// Is makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// denied are the networks refused unless an allow entry covers the address.
var denied = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",         // "this network", includes the unspecified 0.0.0.0
		"10.0.0.0/8",        // private (RFC 1918)
		"100.64.0.0/10",     // CGNAT (RFC 6598); includes Alibaba's metadata 100.100.100.200
		"127.0.0.0/8",       // loopback
		"169.254.0.0/16",    // link-local; cloud metadata 169.254.169.254
		"172.16.0.0/12",     // private (RFC 1918)
		"192.0.0.0/24",      // IETF protocol assignments
		"192.0.2.0/24",      // documentation
		"192.168.0.0/16",    // private (RFC 1918)
		"198.18.0.0/15",     // benchmarking
		"198.51.100.0/24",   // documentation
		"203.0.113.0/24",    // documentation
		"224.0.0.0/4",       // multicast
		"240.0.0.0/4",       // reserved, includes broadcast 255.255.255.255
		"::/128",            // unspecified
		"::1/128",           // loopback
		"100::/64",          // discard-only
		"2001::/32",         // Teredo (embeds an obfuscated IPv4 address)
		"2001:db8::/32",     // documentation
		"64:ff9b:1::/48",    // local-use NAT64 (RFC 8215)
		"fc00::/7",          // unique local
		"fd00:ec2::254/128", // AWS metadata over IPv6 (inside fc00::/7; named for clarity)
		"fe80::/10",         // link-local
		"fec0::/10",         // deprecated site-local
		"ff00::/8",          // multicast
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// Addresses in these networks carry an IPv4 address, judged as that
// address: IPv4-mapped (::ffff:10.0.0.1), 6to4 and NAT64 (64:ff9b::/96).
var (
	mapped = netip.MustParsePrefix("::ffff:0:0/96")
	sixTo4 = netip.MustParsePrefix("2002::/16")
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
)

// Policy decides which addresses may be dialled. The zero value and a nil
// *Policy refuse the default denied networks and allow everything else.
type Policy struct {
	prefixes []netip.Prefix
	hosts    map[string]bool
}

// New builds a policy from allow entries (egress.allow): a CIDR
// (10.1.0.0/16), a single IP (127.0.0.1, ::1) or a host name
// (hooks.internal), which allows whatever that exact name resolves to. An
// entry that is none of these is an error naming its index.
func New(allow []string) (*Policy, error) {
	p := &Policy{hosts: map[string]bool{}}
	for i, s := range allow {
		pfx, host, err := parseEntry(s)
		if err != nil {
			return nil, fmt.Errorf("egress: allow[%d]: %w", i, err)
		}
		if host != "" {
			p.hosts[host] = true
		} else {
			p.prefixes = append(p.prefixes, pfx)
		}
	}
	return p, nil
}

// CheckEntry reports what is wrong with one allow entry, nil when it is a
// CIDR, an IP or a host name.
func CheckEntry(s string) error {
	_, _, err := parseEntry(s)
	return err
}

// parseEntry returns an entry as a prefix, or as a normalised host name.
func parseEntry(s string) (netip.Prefix, string, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return netip.Prefix{}, "", errors.New("empty; give a CIDR (10.1.0.0/16), an IP (10.1.2.3) or a host name (hooks.internal)")
	case strings.Contains(s, "://"):
		return netip.Prefix{}, "", fmt.Errorf("%q is a URL; give its host name or IP only", s)
	case strings.Contains(s, "/"):
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, "", fmt.Errorf("%q is not a CIDR; write it like 10.1.0.0/16 or fd12::/64", s)
		}
		return pfx.Masked(), "", nil
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		if ip.Zone() != "" {
			return netip.Prefix{}, "", fmt.Errorf("%q has a zone; give the IP without %%zone", s)
		}
		return netip.PrefixFrom(ip, ip.BitLen()), "", nil
	}
	if strings.Contains(s, "*") {
		return netip.Prefix{}, "", fmt.Errorf("%q: wildcards are not supported; list each host name", s)
	}
	host := normalHost(s)
	if !validHost(host) {
		return netip.Prefix{}, "", fmt.Errorf("%q is not a CIDR, an IP or a host name (no port, no path)", s)
	}
	return netip.Prefix{}, host, nil
}

// normalHost lowercases a host name and drops a trailing dot.
func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// validHost reports whether h is a DNS host name: dot-separated labels of
// letters, digits, - and _, each 1-63 long, 253 in all.
func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// AllowedHost reports whether host name host is allowed by name (an allow
// entry names it): whatever it resolves to may be dialled.
func (p *Policy) AllowedHost(host string) bool {
	return p != nil && p.hosts[normalHost(host)]
}

// AllowedIP reports whether ip may be dialled: an allow entry covers it,
// or it is in none of the denied networks. An IPv4 address embedded in an
// IPv6 one (IPv4-mapped, 6to4, NAT64) is judged as that IPv4 address too.
func (p *Policy) AllowedIP(ip netip.Addr) bool {
	if !ip.IsValid() {
		return false
	}
	ip = ip.WithZone("")
	if p.allowListed(ip) {
		return true
	}
	if v4, ok := embedded(ip); ok {
		if p.allowListed(v4) {
			return true
		}
		if isDenied(v4) {
			return false
		}
		if ip.Is4In6() {
			return true // an IPv4-mapped address is dialled as the IPv4 one
		}
	}
	return !isDenied(ip)
}

func (p *Policy) allowListed(ip netip.Addr) bool {
	if p == nil {
		return false
	}
	for _, pfx := range p.prefixes {
		if pfx.Contains(ip) {
			return true
		}
	}
	return false
}

func isDenied(ip netip.Addr) bool {
	for _, pfx := range denied {
		if pfx.Contains(ip) {
			return true
		}
	}
	return false
}

// embedded returns the IPv4 address inside an IPv4-mapped, 6to4 or NAT64
// (64:ff9b::/96) address.
func embedded(ip netip.Addr) (netip.Addr, bool) {
	switch {
	case !ip.Is6():
		return netip.Addr{}, false
	case mapped.Contains(ip):
		return ip.Unmap(), true
	case sixTo4.Contains(ip):
		b := ip.As16()
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	case nat64.Contains(ip):
		b := ip.As16()
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	}
	return netip.Addr{}, false
}

// control runs before each connect(2): it refuses an address the policy
// does not allow, so no packet reaches it.
func (p *Policy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("egress: dial %s %q: not an IP address", network, address)
	}
	if !p.AllowedIP(ap.Addr()) {
		return &DeniedError{IP: ap.Addr().WithZone("")}
	}
	return nil
}

// dialer returns the net.Dialer that checks every address it connects to.
func (p *Policy) dialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.control}
}

// DialContext dials addr ("host:port") like net.Dialer.DialContext does,
// refusing (before any connection attempt) each resolved address the policy
// does not allow; a host name listed in egress.allow is dialled as is. A
// refusal is a *DeniedError naming the host.
func (p *Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("egress: dial %q: %w", addr, err)
	}
	d := p.dialer()
	if p.AllowedHost(host) {
		d.Control = nil
	}
	conn, err := d.DialContext(ctx, network, addr)
	var de *DeniedError
	if errors.As(err, &de) {
		return nil, &DeniedError{Host: host, IP: de.IP}
	}
	return conn, err
}

// CheckHost is the check that can be made before anything is dialled, for
// a destination as it is given (a URL's host, without port): an IP the
// policy refuses, or a loopback name (localhost, *.localhost), is a
// *DeniedError unless egress.allow lists it. Other names pass: what they
// resolve to is checked when they are dialled.
func (p *Policy) CheckHost(host string) error {
	host = strings.Trim(host, "[]")
	if ip, err := netip.ParseAddr(host); err == nil {
		if !p.AllowedIP(ip) {
			return &DeniedError{IP: ip.WithZone("")}
		}
		return nil
	}
	name := normalHost(host)
	if (name == "localhost" || strings.HasSuffix(name, ".localhost")) && !p.AllowedHost(name) &&
		!p.AllowedIP(netip.MustParseAddr("127.0.0.1")) {
		return &DeniedError{Host: name, IP: netip.MustParseAddr("127.0.0.1")}
	}
	return nil
}

// MaxRedirects is how many redirects a Client follows.
const MaxRedirects = 5

// Client returns an HTTP client whose every connection, redirects included,
// goes through DialContext. It uses no proxy (a proxy from the environment
// would dial for it, unchecked), follows at most MaxRedirects redirects and
// never one from https to http. timeout bounds a whole request (0 = none).
func (p *Policy) Client(timeout time.Duration) *http.Client {
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           p.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Timeout: timeout, Transport: t, CheckRedirect: checkRedirect}
}

// checkRedirect stops after MaxRedirects and refuses https → http.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return fmt.Errorf("egress: stopped after %d redirects", MaxRedirects)
	}
	if prev := via[len(via)-1]; prev.URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("egress: refused a redirect from https to %s", req.URL.Scheme)
	}
	return nil
}
