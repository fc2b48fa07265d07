package chat_test

import (
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

func TestSessionKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   chat.Inbound
		want string
	}{
		{"thread reply", chat.Inbound{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "100.1", MessageID: "100.9"}, "ops:slack:T1:C1:100.1"},
		{"channel top level keys on its own id", chat.Inbound{Platform: "slack", Workspace: "T1", Channel: "C1", MessageID: "100.1"}, "ops:slack:T1:C1:100.1"},
		{"dm top level is one session", chat.Inbound{Platform: "slack", Workspace: "T1", Channel: "D1", MessageID: "100.1", DirectMessage: true}, "ops:slack:T1:D1:"},
		{"dm thread", chat.Inbound{Platform: "slack", Workspace: "T1", Channel: "D1", Thread: "100.1", MessageID: "100.2", DirectMessage: true}, "ops:slack:T1:D1:100.1"},
		{"telegram no workspace", chat.Inbound{Platform: "telegram", Channel: "-42", Thread: "7", MessageID: "9"}, "ops:telegram::-42:7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := chat.SessionKey("ops", tt.in); got != tt.want {
				t.Errorf("SessionKey = %q, want %q", got, tt.want)
			}
		})
	}
	// A root message and a reply in its thread share a session.
	root := chat.Inbound{Platform: "slack", Workspace: "T1", Channel: "C1", MessageID: "1.1"}
	reply := chat.Inbound{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "1.1", MessageID: "1.2"}
	if chat.SessionKey("a", root) != chat.SessionKey("a", reply) {
		t.Error("root and reply keyed to different sessions")
	}
}

// Every session a chat message gets has a name the API and MCP refuse to
// create (core.GatewaySessionID), hashed or not: whoever creates a session
// first sets its binding.
func TestSessionIDIsTheGateways(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("9", 140) // over the API's 128 characters: hashed
	for _, platform := range []string{chat.PlatformSlack, chat.PlatformDiscord, chat.PlatformTelegram} {
		for _, in := range []chat.Inbound{
			{Platform: platform, Workspace: "T1", Channel: "C1", MessageID: "1.1"},
			{Platform: platform, Channel: long, MessageID: "1.1"},
		} {
			if id := chat.SessionID("ops", in); !core.GatewaySessionID(id) {
				t.Errorf("%s session %s: the API may create it", platform, id)
			}
		}
	}
}
