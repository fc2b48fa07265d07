package slack

import (
	"testing"

	"github.com/agentgate/agentgate/interfaces/chat"
)

func TestDenyModalGolden(t *testing.T) {
	t.Parallel()
	card := chat.ApprovalCard{ApprovalID: "apr_0123456789abcdef", Agent: "ops", Tool: "deploy"}
	// The metadata carries the clicked card (its ts): the submission counts as a click there.
	goldenJSON(t, "deny_modal", DenyModal(card, `{"approval_id":"apr_0123456789abcdef","channel":"C1","message":"1700000101.000100"}`))
}
