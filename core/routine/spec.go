package routine

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentgate/agentgate/core"
)

// Spec is a routine definition as written in the config file (config.Routine
// converts to it) or sent to the API, before defaults are filled in.
type Spec struct {
	// Agent runs the routine. Required.
	Agent string
	// Schedule: 5-field cron, a descriptor or @every <duration>. Required.
	Schedule string
	// Timezone is the IANA zone of the schedule. Default UTC.
	Timezone string
	// Input is what the agent is asked on every fire. Required.
	Input string
	// DeliverTo is a target (see ParseTarget). Default none.
	DeliverTo string
	// Enabled is the starting value. Default true.
	Enabled *bool
	// Missed is skip (default) or once.
	Missed string
	// MaxFailures: 0 = the default 5, -1 = never disable.
	MaxFailures int
	// Callers limit who may trigger it on demand; empty = anyone.
	Callers []string
}

// Problem is one thing wrong with a Spec. Field is the field's name as in
// the config file and the API (schedule, deliver_to, …); "" is the id.
type Problem struct {
	Field string
	Msg   string
}

func (p Problem) String() string {
	if p.Field == "" {
		return p.Msg
	}
	return p.Field + ": " + p.Msg
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Problems checks routine id defined by s and returns what is wrong with it.
// agents are the defined agents, sorted; nil skips the agent check.
func (s Spec) Problems(id string, agents []string) []Problem {
	var p []Problem
	add := func(field, format string, args ...any) {
		p = append(p, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if !idPattern.MatchString(id) {
		add("", "routine names use lowercase letters, digits, _ and - (at most 64)")
	}
	switch {
	case s.Agent == "":
		add("agent", "required: the agent that runs it (defined agents: %s)", strings.Join(agents, ", "))
	case agents != nil && !slices.Contains(agents, s.Agent):
		add("agent", "unknown agent %q (defined agents: %s)", s.Agent, strings.Join(agents, ", "))
	}
	if strings.TrimSpace(s.Schedule) == "" {
		add("schedule", `required: a cron expression like "0 9 * * 1-5", @daily or @every 30m`)
	} else if _, err := ParseSchedule(s.Schedule, "UTC"); err != nil {
		add("schedule", "%v", strings.TrimPrefix(err.Error(), "schedule "))
	}
	if s.Timezone != "" {
		if _, err := ParseSchedule("@daily", s.Timezone); err != nil && s.Timezone == "Local" {
			add("timezone", "%q is the host's zone, which other hosts may not share: name the zone (e.g. UTC, Europe/Berlin)", s.Timezone)
		} else if err != nil {
			add("timezone", "unknown IANA zone %q (e.g. UTC, Europe/Berlin, America/New_York)", s.Timezone)
		}
	}
	if strings.TrimSpace(s.Input) == "" {
		add("input", "required: what the agent is asked on every run")
	}
	if _, err := ParseTarget(s.DeliverTo); err != nil {
		add("deliver_to", "%v", err)
	}
	if s.Missed != "" && !core.MissedPolicy(s.Missed).Valid() {
		add("missed", "must be skip or once, got %q", s.Missed)
	}
	if s.MaxFailures < -1 {
		add("max_failures", "must be -1 (never disable), 0 (default 5) or more")
	}
	for i, c := range s.Callers {
		if c == "" || strings.ContainsAny(c, " \t\r\n") {
			add(fmt.Sprintf("callers[%d]", i), "%q: name a person, a platform id (slack:U123, discord:42, telegram:5550001), key:<name>, role:<role>, a group id or channel:<platform>:<id>, without spaces", c)
		}
	}
	return p
}

// Def returns routine id as the store keeps it, with defaults filled in.
func (s Spec) Def(id string) core.RoutineDef {
	d := core.RoutineDef{ID: id, AgentID: s.Agent, Schedule: strings.TrimSpace(s.Schedule), Timezone: s.Timezone,
		Input: s.Input, DeliverTo: strings.TrimSpace(s.DeliverTo), Enabled: s.Enabled == nil || *s.Enabled,
		Missed: core.MissedPolicy(s.Missed), MaxFailures: s.MaxFailures, Callers: s.Callers}
	if d.Timezone == "" {
		d.Timezone = "UTC"
	}
	if d.DeliverTo == "" {
		d.DeliverTo = TargetNone
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

// specOf returns stored routine r as a Spec (the inverse of Def).
func specOf(r core.Routine) Spec {
	enabled := r.Enabled
	s := Spec{Agent: r.AgentID, Schedule: r.Schedule, Timezone: r.Timezone, Input: r.Input, DeliverTo: r.DeliverTo,
		Enabled: &enabled, Missed: string(r.Missed), MaxFailures: r.MaxFailures, Callers: r.Callers}
	if s.MaxFailures == 0 {
		s.MaxFailures = -1 // never
	}
	return s
}

// with returns s with the fields set in in.
func (s Spec) with(in core.RoutineSpec) Spec {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.Agent, in.Agent)
	set(&s.Schedule, in.Schedule)
	set(&s.Timezone, in.Timezone)
	set(&s.Input, in.Input)
	set(&s.DeliverTo, in.DeliverTo)
	set(&s.Missed, in.Missed)
	if in.Enabled != nil {
		s.Enabled = in.Enabled
	}
	if in.MaxFailures != nil {
		s.MaxFailures = *in.MaxFailures
	}
	if in.Callers != nil {
		s.Callers = *in.Callers
	}
	return s
}
