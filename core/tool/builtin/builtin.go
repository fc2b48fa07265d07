// Package builtin holds the tools compiled into agentgate, used by the
// offline demo agent.
package builtin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentgate/agentgate/core"
)

// New returns the builtin tool called name.
func New(name string, clock core.Clock) (core.Tool, error) {
	switch name {
	case "demo_deploy":
		return DemoDeploy{}, nil
	case "clock":
		return Clock{Clock: clock}, nil
	}
	return nil, fmt.Errorf("unknown builtin tool %q", name)
}

// DemoDeploy pretends to deploy: it answers with what it was asked to do and
// the idempotency key, and deploys nothing.
type DemoDeploy struct{}

// Call reports a pretend deployment.
func (DemoDeploy) Call(ctx context.Context, args json.RawMessage, key string) (string, error) {
	var a map[string]any
	if err := json.Unmarshal(args, &a); err != nil {
		return "", &core.ToolError{Message: "arguments must be a JSON object"}
	}
	out := map[string]any{"status": "deployed (demo: nothing was changed)", "service": a["service"], "env": a["env"], "idempotency_key": key}
	b, err := json.Marshal(out)
	return string(b), err
}

// Clock tells the time in UTC.
type Clock struct{ Clock core.Clock }

// Call returns the current time.
func (c Clock) Call(ctx context.Context, args json.RawMessage, key string) (string, error) {
	return fmt.Sprintf(`{"utc":%q}`, c.Clock.Now().UTC().Format("2006-01-02T15:04:05Z")), nil
}
