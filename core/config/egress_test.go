package config_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core/config"
)

func TestEgressAllow(t *testing.T) {
	c, err := config.Parse([]byte(`
agents: {ops: {model: {provider: demo}}}
egress:
  allow: [10.1.0.0/16, 127.0.0.1, hooks.internal]
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Egress.Policy()
	if err != nil {
		t.Fatal(err)
	}
	if !p.AllowedIP(netip.MustParseAddr("10.1.9.9")) || !p.AllowedIP(netip.MustParseAddr("127.0.0.1")) ||
		!p.AllowedHost("hooks.internal") || p.AllowedIP(netip.MustParseAddr("169.254.169.254")) {
		t.Error("the policy does not follow egress.allow")
	}

	_, err = config.Parse([]byte(`
agents: {ops: {model: {provider: demo}}}
egress:
  allow: [10.1.0.0/16, 127.0.0.1, 10.0.0.0/40, "https://hooks.internal/x"]
`), env(nil))
	for _, want := range []string{`egress.allow[2]: "10.0.0.0/40" is not a CIDR`, `egress.allow[3]: "https://hooks.internal/x" is a URL`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad entries: %v, want %q", err, want)
		}
	}
}
