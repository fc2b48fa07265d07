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

// CardText is the card's text, MarkdownV2, in a chat that names nobody.
func CardText(c chat.ApprovalCard) string { return people{}.cardText(c, nil, false) }

// Approvers renders approver ids in plain text without asking Telegram who
// they are (a Telegram user as "a Telegram user").
func Approvers(ids []string) string { return people{}.plainList(ids) }
