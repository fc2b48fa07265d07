package config_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
)

func TestRoutinesExampleLoads(t *testing.T) {
	c, err := config.Load(filepath.Join("..", "..", "examples", "routines.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defs := c.RoutineDefs()
	if len(defs) != 2 || defs[0].ID != "cost-check" || defs[1].ID != "daily-digest" {
		t.Fatalf("routines = %+v, want cost-check and daily-digest", defs)
	}
	d := defs[1]
	want := core.RoutineDef{ID: "daily-digest", AgentID: "ops", Schedule: "0 9 * * 1-5", Timezone: "Europe/Berlin",
		Input: "Summarize yesterday's deploys and open incidents.", DeliverTo: "slack:C0123456789", Enabled: false,
		Missed: core.MissedSkip, MaxFailures: 5, Callers: []string{"channel:slack:C0123456789", "role:operator"}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("daily-digest = %+v\nwant           %+v", d, want)
	}
	cost := defs[0]
	if cost.DeliverTo != "webhook:http://127.0.0.1:9999/routines" || cost.Missed != core.MissedOnce || cost.MaxFailures != 3 || cost.Timezone != "UTC" {
		t.Errorf("cost-check = %+v", cost)
	}
}

func TestRoutineDefaults(t *testing.T) {
	c, err := config.Parse([]byte(`
agents: {ops: {model: {provider: demo}}}
routines:
  r:
    agent: ops
    schedule: "@hourly"
    input: hi
  never:
    agent: ops
    schedule: "@daily"
    input: hi
    max_failures: -1
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	defs := c.RoutineDefs()
	want := core.RoutineDef{ID: "r", AgentID: "ops", Schedule: "@hourly", Timezone: "UTC", Input: "hi",
		DeliverTo: "none", Enabled: true, Missed: core.MissedSkip, MaxFailures: 5}
	if !reflect.DeepEqual(defs[1], want) {
		t.Errorf("defaults = %+v\nwant       %+v", defs[1], want)
	}
	if defs[0].MaxFailures != 0 {
		t.Errorf("max_failures -1 = %d in the store, want 0 (never)", defs[0].MaxFailures)
	}
}

func TestRoutineErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name, routine, want string
	}{
		{"bad cron", `{agent: ops, schedule: "61 * * * *", input: x}`, "routines.r.schedule: "},
		{"six fields", `{agent: ops, schedule: "0 0 9 * * 1", input: x}`, "routines.r.schedule: "},
		{"short every", `{agent: ops, schedule: "@every 10ms", input: x}`, "routines.r.schedule: \"@every 10ms\": @every needs a duration of at least 1s"},
		{"tz prefix", `{agent: ops, schedule: "CRON_TZ=UTC 0 9 * * *", input: x}`, "routines.r.schedule: \"CRON_TZ=UTC 0 9 * * *\": set the zone with timezone"},
		{"no schedule", `{agent: ops, input: x}`, "routines.r.schedule: required"},
		{"timezone", `{agent: ops, schedule: "@daily", timezone: Mars/Olympus, input: x}`, `routines.r.timezone: unknown IANA zone "Mars/Olympus"`},
		{"agent", `{agent: nope, schedule: "@daily", input: x}`, `routines.r.agent: unknown agent "nope" (defined agents: ops)`},
		{"no agent", `{schedule: "@daily", input: x}`, "routines.r.agent: required"},
		{"input", `{agent: ops, schedule: "@daily"}`, "routines.r.input: required"},
		{"deliver relative", `{agent: ops, schedule: "@daily", input: x, deliver_to: "webhook:/hook"}`, "routines.r.deliver_to: webhook: must be an absolute http(s) URL"},
		{"deliver kind", `{agent: ops, schedule: "@daily", input: x, deliver_to: "email:a@b.c"}`, "routines.r.deliver_to: must be slack:<channel>, discord:<channel>, telegram:<chat>, webhook:<url> or none"},
		{"deliver empty channel", `{agent: ops, schedule: "@daily", input: x, deliver_to: "slack:"}`, "routines.r.deliver_to: slack: name the channel"},
		{"missed", `{agent: ops, schedule: "@daily", input: x, missed: all}`, `routines.r.missed: must be skip or once, got "all"`},
		{"max failures", `{agent: ops, schedule: "@daily", input: x, max_failures: -2}`, "routines.r.max_failures: must be -1"},
		{"unknown field", `{agent: ops, schedule: "@daily", input: x, cron: x}`, "field cron not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte("agents: {ops: {model: {provider: demo}}}\nroutines:\n  r: "+tc.routine+"\n"), env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
	_, err := config.Parse([]byte("agents: {ops: {model: {provider: demo}}}\nroutines:\n  Bad_Name: {agent: ops, schedule: \"@daily\", input: x}\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "routines.Bad_Name: routine names use lowercase") {
		t.Errorf("bad name: %v", err)
	}
}
