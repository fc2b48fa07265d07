package config

import (
	"fmt"
	"strings"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/routine"
)

// Routine is a standing agent job: runs fired by a schedule (and on demand).
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
}

// IsEnabled is Enabled with its default (true).
func (r Routine) IsEnabled() bool { return r.Enabled == nil || *r.Enabled }

// Def returns the routine as the store syncs it, with defaults filled in.
func (r Routine) Def(id string) core.RoutineDef {
	d := core.RoutineDef{ID: id, AgentID: r.Agent, Schedule: strings.TrimSpace(r.Schedule), Timezone: r.Timezone,
		Input: r.Input, DeliverTo: strings.TrimSpace(r.DeliverTo), Enabled: r.IsEnabled(),
		Missed: core.MissedPolicy(r.Missed), MaxFailures: r.MaxFailures}
	if d.Timezone == "" {
		d.Timezone = "UTC"
	}
	if d.DeliverTo == "" {
		d.DeliverTo = routine.TargetNone
	}
	if d.Missed == "" {
		d.Missed = core.MissedSkip
	}
	switch {
	case d.MaxFailures == 0:
		d.MaxFailures = 5
	case d.MaxFailures < 0:
		d.MaxFailures = 0 // never
	}
	return d
}

// RoutineDefs returns every routine as the store syncs it, sorted by id.
func (c *Config) RoutineDefs() []core.RoutineDef {
	defs := make([]core.RoutineDef, 0, len(c.Routines))
	for _, id := range sortedKeys(c.Routines) {
		defs = append(defs, c.Routines[id].Def(id))
	}
	return defs
}

// validateRoutines returns the problems of the routines section, each
// prefixed with its field path.
func (c *Config) validateRoutines() []string {
	var p []string
	add := func(path, format string, args ...any) {
		p = append(p, path+": "+fmt.Sprintf(format, args...))
	}
	for _, id := range sortedKeys(c.Routines) {
		r := c.Routines[id]
		path := "routines." + id
		if !idPattern.MatchString(id) {
			add(path, "routine names use lowercase letters, digits, _ and - (at most 64)")
		}
		switch _, ok := c.Agents[r.Agent]; {
		case r.Agent == "":
			add(path+".agent", "required: the agent that runs it (defined agents: %s)", strings.Join(sortedKeys(c.Agents), ", "))
		case !ok:
			add(path+".agent", "unknown agent %q (defined agents: %s)", r.Agent, strings.Join(sortedKeys(c.Agents), ", "))
		}
		if strings.TrimSpace(r.Schedule) == "" {
			add(path+".schedule", `required: a cron expression like "0 9 * * 1-5", @daily or @every 30m`)
		} else if _, err := routine.ParseSchedule(r.Schedule, "UTC"); err != nil {
			add(path+".schedule", "%v", strings.TrimPrefix(err.Error(), "schedule "))
		}
		if r.Timezone != "" {
			if _, err := routine.ParseSchedule("@daily", r.Timezone); err != nil {
				add(path+".timezone", "unknown IANA zone %q (e.g. UTC, Europe/Berlin, America/New_York)", r.Timezone)
			}
		}
		if strings.TrimSpace(r.Input) == "" {
			add(path+".input", "required: what the agent is asked on every run")
		}
		if _, err := routine.ParseTarget(r.DeliverTo); err != nil {
			add(path+".deliver_to", "%v", err)
		}
		if r.Missed != "" && !core.MissedPolicy(r.Missed).Valid() {
			add(path+".missed", "must be skip or once, got %q", r.Missed)
		}
		if r.MaxFailures < -1 {
			add(path+".max_failures", "must be -1 (never disable), 0 (default 5) or more")
		}
	}
	return p
}
