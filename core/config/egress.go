package config

import (
	"fmt"

	"github.com/agentgate/agentgate/core/egress"
)

// Egress limits where the gateway connects for destinations it gets
// through the API (or the CLI), not from this file: the webhook:<url> of a
// routine created or edited through the API. By default those reach public
// addresses only; loopback, private, link-local (cloud metadata), CGNAT,
// multicast and reserved addresses are refused when the connection is
// dialled. Destinations written in this file are not limited.
type Egress struct {
	// Allow lists what such destinations may reach anyway: CIDRs
	// (10.1.0.0/16), single IPs (10.1.2.3, ::1) or host names
	// (hooks.internal: that exact name, whatever it resolves to).
	// Default none.
	Allow []string `yaml:"allow"`
}

// Policy builds the egress policy of the allow list.
func (e Egress) Policy() (*egress.Policy, error) { return egress.New(e.Allow) }

// validateEgress returns the problems of the egress section, each prefixed
// with its field path.
func (c *Config) validateEgress() []string {
	var p []string
	for i, s := range c.Egress.Allow {
		if err := egress.CheckEntry(s); err != nil {
			p = append(p, fmt.Sprintf("egress.allow[%d]: %v", i, err))
		}
	}
	return p
}
