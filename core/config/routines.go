package config

import (
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/routine"
)

// Routine is a standing agent job: runs fired by a schedule (and on demand).
// Its fields are routine.Spec's, in the same order (it converts to one).
type Routine struct {
	// Agent runs the routine; it must be defined under agents.
	Agent string `yaml:"agent"`
	// Schedule: 5-field cron ("0 9 * * 1-5"), @hourly, @daily, @weekly,
	// @monthly, @yearly, or @every <duration> (@every 30m). Required.
	Schedule string `yaml:"schedule"`
	// Timezone is the IANA zone the schedule is read in. Default UTC.
	Timezone string `yaml:"timezone"`
	// Input is what the agent is asked on every fire. Required.
	Input string `yaml:"input"`
	// DeliverTo: slack:<channel>, discord:<channel>, telegram:<chat>,
	// webhook:<absolute http(s) URL> or none. Default none.
	DeliverTo string `yaml:"deliver_to"`
	// Enabled is the starting value; a toggle through the API or CLI wins
	// until this value itself changes. Default true.
	Enabled *bool `yaml:"enabled"`
	// Missed is what happens to due times that pass while the gateway is
	// down: skip (default) or once (one catch-up run).
	Missed string `yaml:"missed"`
	// MaxFailures is how many consecutive failed runs disable the routine.
	// Default 5; -1 = never.
	MaxFailures int `yaml:"max_failures"`
	// Callers limit who may trigger the routine on demand (chat commands,
	// API, CLI, MCP): people, platform ids, group ids, key:<name>,
	// role:<role> and channel:<platform>:<id>. Default: anyone who may reach
	// it. The schedule fires whatever it says.
	Callers []string `yaml:"callers"`
}

// IsEnabled is Enabled with its default (true).
func (r Routine) IsEnabled() bool { return r.Enabled == nil || *r.Enabled }

// Def returns the routine as the store syncs it, with defaults filled in.
func (r Routine) Def(id string) core.RoutineDef { return routine.Spec(r).Def(id) }

// RoutineDefs returns every routine as the store syncs it, sorted by id.
func (c *Config) RoutineDefs() []core.RoutineDef {
	defs := make([]core.RoutineDef, 0, len(c.Routines))
	for _, id := range sortedKeys(c.Routines) {
		defs = append(defs, c.Routines[id].Def(id))
	}
	return defs
}

// validateRoutines returns the problems of the routines section, each
// prefixed with its field path. The API checks routines it creates or edits
// with the same routine.Spec.Problems, so the messages match.
func (c *Config) validateRoutines() []string {
	var p []string
	agents := sortedKeys(c.Agents)
	for _, id := range sortedKeys(c.Routines) {
		for _, pr := range routine.Spec(c.Routines[id]).Problems(id, agents) {
			path := "routines." + id
			if pr.Field != "" {
				path += "." + pr.Field
			}
			p = append(p, path+": "+pr.Msg)
		}
	}
	return p
}
