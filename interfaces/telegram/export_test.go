package telegram

import "github.com/agentgate/agentgate/interfaces/chat"

// CardTextIn is the text of card c as the notifier sends it in a chat that
// names Telegram users as names does (user id → "@username" or name);
// approvers are the policy's approver ids.
func CardTextIn(c chat.ApprovalCard, approvers []string, names map[int64]string) string {
	p := people{names: names}
	c.Approvers = p.plainList(approvers)
	return p.cardText(c, approvers, false)
}
