package routine

import (
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"
)

// A routine's sessions have names the API and MCP refuse to create
// (core.GatewaySessionID), hashed or not: whoever creates a session first
// sets its binding, where the routine's results go.
func TestRoutineSessionIDsAreTheGateways(t *testing.T) {
	t.Parallel()
	r := core.Routine{ID: "nightly", AgentID: "ops"}
	ids := []string{
		SessionID(r),
		chatSessionID(r, core.Binding{Platform: "slack", Channel: "C1", Thread: "1.1"}),
		chatSessionID(r, core.Binding{Platform: "telegram", Channel: strings.Repeat("9", 140)}), // hashed
	}
	for _, id := range ids {
		if !core.GatewaySessionID(id) {
			t.Errorf("routine session %s: the API may create it", id)
		}
	}
}
