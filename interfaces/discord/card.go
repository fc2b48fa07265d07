package discord

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// customIDPrefix starts the custom_id of an approval card's buttons:
// "agentgate:approve:<approval id>" and "agentgate:deny:<approval id>".
const customIDPrefix = "agentgate:"

// maxCustomID is the longest custom_id Discord takes.
const maxCustomID = 100

// CustomID is the custom_id of the button that takes action (chat.ActionApprove
// or chat.ActionDeny) on approval id.
func CustomID(action, id string) string { return customIDPrefix + action + ":" + id }

// ParseCustomID reads a button's custom_id; ok is false for one that is not
// an approval button.
func ParseCustomID(s string) (action, id string, ok bool) {
	rest, found := strings.CutPrefix(s, customIDPrefix)
	if !found || len(s) > maxCustomID {
		return "", "", false
	}
	action, id, found = strings.Cut(rest, ":")
	if !found || id == "" || (action != chat.ActionApprove && action != chat.ActionDeny) {
		return "", "", false
	}
	return action, id, true
}

// argsRoom is the room of a card's arguments: 1,200 characters, which
// leaves the rest of Discord's 2,000 to the card's other lines. A click on
// Approve is checked against it too (chat.Decide).
var argsRoom = chat.ArgsRoom{Max: 1200, Len: utf8.RuneCountInString, Mark: "\n…"}

// ApprovalMessage is the message of an approval card: the request with
// Approve (success style) and Deny (danger style) buttons while pending, the
// outcome without buttons once decided. Arguments over argsRoom are cut,
// and the pending card then says where to approve them (chat.CutNote) and
// offers only Deny.
func ApprovalMessage(c chat.ApprovalCard) Message {
	var b strings.Builder
	if c.Pending() {
		fmt.Fprintf(&b, "**Approval needed**: agent **%s** wants to run %s", inline(c.Agent), code(c.Tool))
	} else {
		fmt.Fprintf(&b, "%s: agent **%s** wanted to run %s", outcome(c), inline(c.Agent), code(c.Tool))
	}
	if c.Server != "" {
		fmt.Fprintf(&b, " from MCP server %s", code(c.Server))
	}
	shown := argsRoom.Fit(c.Arguments)
	args := strings.ReplaceAll(shown.Text, "```", "`\u200b``")
	fmt.Fprintf(&b, "\n```json\n%s\n```", args)
	if !c.Pending() {
		if c.Reason != "" {
			fmt.Fprintf(&b, "\nReason: %s", inline(c.Reason))
		}
		return Message{Content: b.String()}
	}
	if c.RequestedBy != "" {
		fmt.Fprintf(&b, "\nRequested by %s", mention(c.RequestedBy))
	}
	if c.Approvers != "" {
		fmt.Fprintf(&b, "\nWho may decide: %s", c.Approvers)
	}
	if !c.ExpiresAt.IsZero() {
		fmt.Fprintf(&b, "\nExpires <t:%d:R>", c.ExpiresAt.Unix())
	}
	var buttons []discordgo.MessageComponent
	if shown.Cut {
		fmt.Fprintf(&b, "\n%s", escape(chat.CutNote(c.ApprovalID, shown)))
	} else {
		buttons = append(buttons, discordgo.Button{Label: "Approve", Style: discordgo.SuccessButton, CustomID: CustomID(chat.ActionApprove, c.ApprovalID)})
	}
	buttons = append(buttons, discordgo.Button{Label: "Deny", Style: discordgo.DangerButton, CustomID: CustomID(chat.ActionDeny, c.ApprovalID)})
	return Message{Content: b.String(), Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: buttons}}}
}

func outcome(c chat.ApprovalCard) string {
	switch c.Status {
	case "approved":
		return "✅ Approved by " + decider(c.DecidedBy)
	case "denied":
		return "❌ Denied by " + decider(c.DecidedBy)
	case "expired":
		return "⌛ Expired"
	case "cancelled":
		return "Cancelled"
	}
	return c.Status
}

// Approvers renders a policy's approver ids: Discord user or role ids (a
// role is matched with the clicker's roles), discord:<user>, key:<name>,
// role:<role>, or "requester".
func Approvers(ids []string) string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id == "requester" {
			out = append(out, "the requester")
			continue
		}
		out = append(out, mention(id))
	}
	return strings.Join(out, ", ")
}

// mention shows a snowflake or a Discord principal id (discord:<user>) as a
// user mention (mentions ping nobody: every message is posted with
// allowed_mentions empty), other text (key:<name>, role:<role>, a decider's
// free-form name) as literal text on one line.
func mention(id string) string {
	if u := strings.TrimPrefix(id, chat.PlatformDiscord+":"); isSnowflake(u) {
		return "<@" + u + ">"
	}
	return inline(id)
}

func decider(who string) string {
	if who == "" {
		return "someone"
	}
	return mention(who)
}

func isSnowflake(s string) bool {
	if len(s) < 5 || len(s) > 20 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// escaper backslash-escapes Discord Markdown: emphasis, code, spoilers,
// quotes, masked links ([text](url)) and <…> tags (channel, command and
// timestamp mentions); "@" gets a zero-width space so @everyone stays text.
var escaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "`", "\\`", "~", `\~`, "|", `\|`, ">", `\>`,
	"<", `\<`, "[", `\[`, "]", `\]`, "@", "@\u200b")

// escape makes s show literally in Discord Markdown.
func escape(s string) string { return escaper.Replace(s) }

// lineBreaks turns every line break into a space: Discord starts a new
// line (and with it headings, lists and quotes) at any of them.
var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\v", " ", "\f", " ", "\u0085", " ", "\u2028", " ", "\u2029", " ")

// inline shows free-form text (an agent's or a decider's name, a reason)
// literally within the line it is put on.
func inline(s string) string { return escape(lineBreaks.Replace(s)) }

// code shows free-form text (a tool name) as an inline code span it cannot
// end early: Markdown cannot escape a backtick inside one, so backticks
// become apostrophes, and line breaks spaces.
func code(s string) string {
	return "`" + strings.ReplaceAll(lineBreaks.Replace(s), "`", "'") + "`"
}
