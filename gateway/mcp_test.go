package gateway

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
)

func TestMCPSettings(t *testing.T) {
	for _, tc := range []struct {
		timeout, channel string
		want             mcpSettings
		err              string
	}{
		{want: mcpSettings{}},
		{timeout: "5m", channel: "slack:C0123", want: mcpSettings{approval: core.ApprovalRule{Timeout: 5 * time.Minute},
			approvalsTo: core.Binding{Platform: "slack", Channel: "C0123"}}},
		{timeout: "soon", err: "AGENTGATE_MCP_APPROVAL_TIMEOUT"},
		{channel: "webhook:https://example.com/x", err: "AGENTGATE_MCP_APPROVALS_CHANNEL: must be a chat conversation"},
		{channel: "C0123", err: "AGENTGATE_MCP_APPROVALS_CHANNEL"},
	} {
		t.Setenv("AGENTGATE_MCP_APPROVAL_TIMEOUT", tc.timeout)
		t.Setenv("AGENTGATE_MCP_APPROVALS_CHANNEL", tc.channel)
		got, err := mcpFromEnv()
		var ue *UsageError
		switch {
		case tc.err != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%+v: err = %v, want a usage error about %s", tc, err, tc.err)
		case tc.err == "" && (err != nil || !reflect.DeepEqual(got, tc.want)):
			t.Errorf("%+v: got %+v, %v; want %+v", tc, got, err, tc.want)
		}
	}
}
