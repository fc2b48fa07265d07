package slack

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// Block ids of an approval card; stable so an edit replaces like with like.
const (
	blockSummary = "approval_summary"
	blockArgs    = "approval_args"
	blockArgsCut = "approval_args_cut"
	blockContext = "approval_context"
	blockActions = "approval_actions"
)

// maxArgsText leaves room for the code fence around the arguments in one
// section block.
const maxArgsText = MaxSectionText - 8

// argsRoom is the room of a card's arguments: maxArgsText characters
// (UTF-16) as the code block shows them, escaped. A click on Approve is
// checked against it too (chat.Decide).
var argsRoom = chat.ArgsRoom{Max: maxArgsText, Len: func(args string) int { return textLen(argsMrkdwn(args)) }, Mark: "…"}

// ApprovalBlocks renders an approval card as Block Kit: the summary (agent and
// tool), the arguments in a code block, a context line (who may approve and
// when it expires, or the outcome), and — while pending — Approve (primary)
// and Deny (danger) buttons whose value is the opaque approval id. Arguments
// over argsRoom are cut, and the pending card then says where to approve
// them (chat.CutNote) and offers only Deny. Times are shown in loc (UTC when
// nil).
func ApprovalBlocks(c chat.ApprovalCard, loc *time.Location) []slackapi.Block {
	if loc == nil {
		loc = time.UTC
	}
	summary := fmt.Sprintf("*%s* wants to run `%s`", escapeMrkdwn(c.Agent), escapeMrkdwn(c.Tool))
	if c.Server != "" {
		summary += " from MCP server `" + escapeMrkdwn(c.Server) + "`"
	}
	if c.RequestedBy != "" {
		summary += " (requested by " + who(c.RequestedBy) + ")"
	}
	if c.Pending() {
		summary = "*Approval needed* · " + summary
	}
	shown := argsRoom.Fit(c.Arguments)
	blocks := []slackapi.Block{
		slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, summary, false, false), nil, nil, slackapi.SectionBlockOptionBlockID(blockSummary)),
		slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, "```"+argsMrkdwn(shown.Text)+"```", false, true), nil, nil, slackapi.SectionBlockOptionBlockID(blockArgs)),
	}
	if c.Pending() && shown.Cut {
		note := "*" + escapeMrkdwn(chat.CutNote(c.ApprovalID, shown)) + "*"
		blocks = append(blocks, slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, note, false, true), nil, nil, slackapi.SectionBlockOptionBlockID(blockArgsCut)))
	}
	blocks = append(blocks, slackapi.NewContextBlock(blockContext, slackapi.NewTextBlockObject(slackapi.MarkdownType, approvalContext(c, loc), false, false)))
	if c.Pending() {
		var buttons []slackapi.BlockElement
		if !shown.Cut {
			buttons = append(buttons, slackapi.NewButtonBlockElement(chat.ActionApprove, c.ApprovalID, slackapi.NewTextBlockObject(slackapi.PlainTextType, "Approve", false, false)).WithStyle(slackapi.StylePrimary))
		}
		buttons = append(buttons, slackapi.NewButtonBlockElement(chat.ActionDeny, c.ApprovalID, slackapi.NewTextBlockObject(slackapi.PlainTextType, "Deny", false, false)).WithStyle(slackapi.StyleDanger))
		blocks = append(blocks, slackapi.NewActionBlock(blockActions, buttons...))
	}
	return blocks
}

// ApprovalText is the notification/fallback text sent with the blocks.
func ApprovalText(c chat.ApprovalCard) string {
	if c.Pending() {
		return escapeMrkdwn(fmt.Sprintf("Approval needed: %s wants to run %s", c.Agent, c.Tool))
	}
	return escapeMrkdwn(fmt.Sprintf("%s wants to run %s: %s", c.Agent, c.Tool, c.Status))
}

// argsMrkdwn is arguments as the card's code block holds them.
func argsMrkdwn(args string) string {
	args = strings.TrimSpace(args)
	if args == "" {
		args = "{}"
	}
	return escapeMrkdwn(apartBackticks(args))
}

// zeroWidthSpace parts characters Slack would read together (a run of
// backticks, a mention's "<!"), without showing.
const zeroWidthSpace = "\u200b"

// apartBackticks puts a zero-width space between backticks next to each
// other, and between the arguments and a code fence they touch, so no run of
// backticks in them closes the card's code block: the rest would show as
// formatted text ("*Approved by* alice"). The arguments read as before.
func apartBackticks(args string) string {
	if !strings.Contains(args, "`") {
		return args
	}
	var b strings.Builder
	b.Grow(len(args) + len(zeroWidthSpace)*strings.Count(args, "`"))
	prev := byte('`') // the opening fence
	for i := range len(args) {
		if args[i] == '`' && prev == '`' {
			b.WriteString(zeroWidthSpace)
		}
		b.WriteByte(args[i])
		prev = args[i]
	}
	if prev == '`' { // the closing fence
		b.WriteString(zeroWidthSpace)
	}
	return b.String()
}

func approvalContext(c chat.ApprovalCard, loc *time.Location) string {
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return " · " + slackDate(t, "{time}", t.In(loc).Format("15:04 MST"))
	}
	switch c.Status {
	case "", "pending":
		who := cmp.Or(c.Approvers, "anyone in this conversation")
		s := "Who may approve: " + who
		if !c.ExpiresAt.IsZero() {
			s += " · Expires " + slackDate(c.ExpiresAt, "{date_short_pretty} {time}", c.ExpiresAt.In(loc).Format("Jan 2 15:04 MST"))
		}
		return s
	case "approved":
		return "Approved by " + decider(c.DecidedBy) + at(c.DecidedAt)
	case "denied":
		s := "Denied by " + decider(c.DecidedBy)
		if c.Reason != "" {
			s += ": " + escapeMrkdwn(c.Reason)
		}
		return s + at(c.DecidedAt)
	case "expired":
		return "Expired" + at(c.DecidedAt)
	case "cancelled":
		return "Cancelled" + at(c.DecidedAt)
	}
	return escapeMrkdwn(c.Status) + at(c.DecidedAt)
}

// slackDate is a time each reader sees in their own time zone
// (<!date^unix^format|fallback>); fallback is shown where Slack cannot.
func slackDate(t time.Time, format, fallback string) string {
	return fmt.Sprintf("<!date^%d^%s|%s>", t.Unix(), format, fallback)
}

// Approvers renders a policy's approver ids as Slack text: users as
// mentions, user groups as group mentions, "requester" as words.
func Approvers(ids []string) string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		switch {
		case id == "requester":
			out = append(out, "the requester")
		case isSlackUserID(slackUser(id)):
			out = append(out, "<@"+slackUser(id)+">")
		case isSlackGroupID(id):
			out = append(out, "<!subteam^"+id+">")
		default:
			out = append(out, escapeMrkdwn(id))
		}
	}
	return strings.Join(out, ", ")
}

// decider renders who decided: a Slack user as a mention, anything else
// (an API key, "cli") as text.
func decider(id string) string {
	if id == "" {
		return "someone"
	}
	return who(id)
}

// who renders a principal or platform id: a Slack user (U123, slack:U123 or
// slack:<team>/U123) as a mention, anything else (key:<name>, …) as text.
func who(id string) string {
	if u := slackUser(id); isSlackUserID(u) {
		return "<@" + u + ">"
	}
	return escapeMrkdwn(id)
}

// slackUser is the Slack user id in a principal id (slack:<team>/<user> or
// slack:<user>), or id itself when it is not a Slack principal.
func slackUser(id string) string {
	rest, ok := strings.CutPrefix(id, "slack:")
	if !ok {
		return id
	}
	if _, user, ok := strings.Cut(rest, "/"); ok {
		return user
	}
	return rest
}

func isSlackUserID(s string) bool { return len(s) > 0 && (s[0] == 'U' || s[0] == 'W') && isSlackID(s) }

func isSlackGroupID(s string) bool { return len(s) > 0 && s[0] == 'S' && isSlackID(s) }

// isSlackID: an upper-case letter then upper-case letters and digits.
func isSlackID(s string) bool {
	if len(s) < 2 {
		return false
	}
	for _, c := range s[1:] {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
