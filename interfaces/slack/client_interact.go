package slack

import (
	"context"

	slackapi "github.com/slack-go/slack"
)

// Tell shows text to user alone in channel, in thread when it is not empty
// (chat.postEphemeral). Like PostEphemeral it skips the channel limiter.
func (c *Client) Tell(ctx context.Context, channel, thread, user, text string) error {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(text, false)}
	if thread != "" {
		opts = append(opts, slackapi.MsgOptionTS(thread))
	}
	return c.call(ctx, "chat.postEphemeral", channel, "", false, true, func(ctx context.Context) error {
		_, err := c.api.PostEphemeralContext(ctx, channel, user, opts...)
		return err
	})
}

// OpenView opens a modal for the click or command that gave triggerID
// (views.open; the trigger lives three seconds).
func (c *Client) OpenView(ctx context.Context, triggerID string, view slackapi.ModalViewRequest) error {
	return c.call(ctx, "views.open", "", "", false, false, func(ctx context.Context) error {
		_, err := c.api.OpenViewContext(ctx, triggerID, view)
		return err
	})
}

// GroupMembers lists the user ids of user group id (usergroups.users.list).
func (c *Client) GroupMembers(ctx context.Context, id string) ([]string, error) {
	var users []string
	err := c.call(ctx, "usergroups.users.list", "", "", false, true, func(ctx context.Context) error {
		var err error
		users, err = c.api.GetUserGroupMembersContext(ctx, id)
		return err
	})
	return users, err
}
