package discord

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// MaxBodyBytes caps the body of a request to /discord/interactions.
const MaxBodyBytes = 1 << 20

// InteractConfig is what approval clicks and application commands need.
// Without Approvals or Store, clicks are answered that approvals are not
// available; without Routines, so are run and routines.
type InteractConfig struct {
	Approvals chat.Decider
	Store     chat.ApprovalLister
	Routines  chat.RoutineRunner
}

// MaxInteractionAge is how far an interaction's signed timestamp may be
// from now: an older one (a replay of a captured request) is refused.
const MaxInteractionAge = 5 * time.Minute

// checkHeaders says what is wrong with an interaction's signature headers
// ("" when they may be verified): both present, a well-formed Ed25519
// signature, a timestamp within MaxInteractionAge of now.
func (h *Handler) checkHeaders(hdr http.Header) string {
	sig, ts := hdr.Get("X-Signature-Ed25519"), hdr.Get("X-Signature-Timestamp")
	if sig == "" || ts == "" {
		return "missing X-Signature-Ed25519 or X-Signature-Timestamp"
	}
	if len(sig) != 2*ed25519.SignatureSize {
		return "malformed signature"
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "timestamp is not a unix time"
	}
	if d := h.cfg.Clock.Now().Sub(time.Unix(secs, 0)); d > MaxInteractionAge || d < -MaxInteractionAge {
		return fmt.Sprintf("interaction is %s old (at most %s)", d.Round(time.Second), MaxInteractionAge)
	}
	return ""
}

// followupLife is how long an interaction token takes follow-ups (15
// minutes, less a margin); later answers are posted as normal messages.
const followupLife = 14 * time.Minute

// ServeHTTP serves POST /discord/interactions: the Ed25519 signature is
// checked (401 when it does not verify), PING is answered PONG, a button
// click is decided at once, and a command is answered with a deferred
// response and its result as a follow-up.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !chat.PostOnly(w, r) {
		return
	}
	if h.key == nil {
		http.Error(w, "Discord interactions over HTTP are off: set DISCORD_PUBLIC_KEY to accept them", http.StatusUnauthorized)
		return
	}
	// The headers are checked before a byte of the body is read, so an
	// unsigned or stale request costs no more than its headers.
	if why := h.checkHeaders(r.Header); why != "" {
		h.log.Warn("discord interaction rejected", "reason", why)
		http.Error(w, "invalid request signature: "+why, http.StatusUnauthorized)
		return
	}
	body, ok := chat.ReadBody(w, r, MaxBodyBytes)
	if !ok {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !discordgo.VerifyInteraction(r, h.key) {
		h.log.Warn("discord interaction rejected: bad signature")
		http.Error(w, "invalid request signature", http.StatusUnauthorized)
		return
	}
	var i discordgo.Interaction
	if err := json.Unmarshal(body, &i); err != nil {
		h.log.Warn("discord interaction malformed", "err", err)
		http.Error(w, "malformed interaction", http.StatusBadRequest)
		return
	}
	resp, after, err := h.Interaction(r.Context(), &i)
	if err != nil {
		h.log.Error("discord interaction", "type", i.Type, "id", i.ID, "err", err)
		http.Error(w, "could not handle the interaction", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	h.runAfter(after)
}

// GatewayInteraction answers an interaction that came over the Gateway
// (its answer is a REST call).
func (h *Handler) GatewayInteraction(ctx context.Context, i *discordgo.Interaction) error {
	resp, after, err := h.Interaction(ctx, i)
	if err != nil {
		return err
	}
	if err := h.cfg.Client.Respond(ctx, i, resp); err != nil {
		return err
	}
	h.runAfter(after)
	return nil
}

// runAfter runs the work a response deferred, beside the request.
func (h *Handler) runAfter(after func(context.Context)) {
	if after == nil {
		return
	}
	h.after.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), followupLife)
		defer cancel()
		after(ctx)
	})
}

// Interaction returns the response to interaction i and, for a deferred
// one, the work to run once it was sent.
func (h *Handler) Interaction(ctx context.Context, i *discordgo.Interaction) (*discordgo.InteractionResponse, func(context.Context), error) {
	// Over the Gateway, discordgo passes on an interaction whose data did
	// not decode without it; its MessageComponentData and
	// ApplicationCommandData would panic.
	_, component := i.Data.(discordgo.MessageComponentInteractionData)
	_, command := i.Data.(discordgo.ApplicationCommandInteractionData)
	modal, submitted := i.Data.(discordgo.ModalSubmitInteractionData)
	switch {
	case i.Type == discordgo.InteractionPing:
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponsePong}, nil, nil
	case i.Type == discordgo.InteractionMessageComponent && component:
		resp, err := h.click(ctx, i, i.MessageComponentData().CustomID, "", false)
		return resp, nil, err
	case i.Type == discordgo.InteractionModalSubmit && submitted:
		resp, err := h.click(ctx, i, modal.CustomID, modalReason(modal), true)
		return resp, nil, err
	case i.Type == discordgo.InteractionApplicationCommand && command:
		return h.command(i)
	case i.Type == discordgo.InteractionMessageComponent || i.Type == discordgo.InteractionApplicationCommand:
		return ephemeral("agentgate could not read this interaction."), nil, nil
	}
	return ephemeral("agentgate does not handle this kind of interaction."), nil, nil
}

func ephemeral(format string, args ...any) *discordgo.InteractionResponse {
	return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: fmt.Sprintf(format, args...), Flags: discordgo.MessageFlagsEphemeral,
			AllowedMentions: noMentions}}
}

// actor is who sent interaction i, with their roles in the guild.
func actor(i *discordgo.Interaction) (user string, roles []string) {
	if i.Member != nil && i.Member.User != nil {
		return i.Member.User.ID, i.Member.Roles
	}
	if i.User != nil {
		return i.User.ID, nil
	}
	return "", nil
}

// messageID is the message whose component was clicked.
func messageID(i *discordgo.Interaction) string {
	if i.Message != nil {
		return i.Message.ID
	}
	return ""
}

// click decides the approval of an Approve or Deny button (customID),
// the same way on every platform (chat.Decide): the clicker (and their
// roles) is checked against the approver policy — a refusal is shown to
// them alone and changes nothing — and the card is updated to the outcome.
// Deny first opens a modal asking for a reason; its submission (confirmed,
// with reason) decides.
func (h *Handler) click(ctx context.Context, i *discordgo.Interaction, customID, reason string, confirmed bool) (*discordgo.InteractionResponse, error) {
	action, id, ok := ParseCustomID(customID)
	if !ok {
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}, nil
	}
	ic := h.cfg.Interact
	user, roles := actor(i)
	act := &chat.Action{Platform: chat.PlatformDiscord, Workspace: i.GuildID, Channel: i.ChannelID,
		MessageRef: messageID(i), UserID: user, Groups: roles, ActionID: action, ApprovalID: id,
		Confirmed: confirmed, Reason: reason}
	c, err := chat.Decide(ctx, ic.Store, ic.Approvals, argsRoom, act, chat.Clicker(act), true)
	if err != nil {
		return nil, err
	}
	switch c.Outcome {
	case chat.AskReason:
		return denyModal(customID), nil
	case chat.Refused:
		h.log.Info("discord approval click refused", "approval", id, "user", user, "why", c.Why)
	case chat.Decided:
		h.log.Info("discord approval decided", "approval", id, "by", user, "action", action)
		run, err := ic.Store.GetRun(ctx, c.Approval.RunID)
		if err != nil { // decided; the approval job edits the card
			return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}, nil
		}
		m := ApprovalMessage(chat.Card(c.Approval, run, Approvers))
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseUpdateMessage,
			Data: &discordgo.InteractionResponseData{Content: m.Content, Components: []discordgo.MessageComponent{}, AllowedMentions: noMentions}}, nil
	}
	return ephemeral("%s", c.Text(Approvers, decider)), nil
}

// reasonInput is the custom_id of the deny modal's text input.
const reasonInput = "reason"

// denyModal asks the clicker of Deny for a reason; the modal's custom_id is
// the button's, so its submission names the approval.
func denyModal(customID string) *discordgo.InteractionResponse {
	return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal,
		Data: &discordgo.InteractionResponseData{CustomID: customID, Title: "Deny this request",
			Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
				discordgo.TextInput{CustomID: reasonInput, Label: "Reason (shown on the card)", Style: discordgo.TextInputParagraph,
					Placeholder: "Why not? Leave empty to deny without a reason.", MaxLength: 500},
			}}}}}
}

// modalReason is the reason typed in a deny modal's submission.
func modalReason(d discordgo.ModalSubmitInteractionData) string {
	for _, c := range d.Components {
		row, ok := c.(*discordgo.ActionsRow)
		if !ok {
			continue
		}
		for _, in := range row.Components {
			if t, ok := in.(*discordgo.TextInput); ok && t.CustomID == reasonInput {
				return strings.TrimSpace(t.Value)
			}
		}
	}
	return ""
}

// followup posts the deferred answer of interaction i: a follow-up while
// its token lives, else a normal message in its channel.
func (h *Handler) followup(ctx context.Context, i *discordgo.Interaction, text string) {
	text = strings.TrimSpace(text)
	var err error
	if h.since(i.ID) < followupLife {
		err = h.cfg.Client.Followup(ctx, i, text, discordgo.MessageFlagsEphemeral)
	} else {
		_, err = h.cfg.Client.Post(ctx, i.ChannelID, Message{Content: text})
	}
	if err != nil {
		h.log.Warn("discord command answer", "interaction", i.ID, "channel", i.ChannelID, "err", err)
	}
}
