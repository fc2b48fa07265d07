package discord

import (
	"context"
	"fmt"

	"github.com/bwmarrin/discordgo"
)

// RunGateway connects to Discord's Gateway (its URL from GET /gateway) with
// the Intents, identifies, and feeds h the MESSAGE_CREATE and
// INTERACTION_CREATE dispatches until ctx ends; discordgo heartbeats and
// reconnects (resuming) on its own. Run it on one replica: every connection
// receives every message.
func (h *Handler) RunGateway(ctx context.Context) error {
	s := h.cfg.Client.s
	defer s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) {
		if err := h.Message(ctx, m.Message); err != nil {
			h.log.Error("discord message not accepted", "message", m.ID, "channel", m.ChannelID, "err", err)
		}
	})()
	defer s.AddHandler(func(_ *discordgo.Session, ic *discordgo.InteractionCreate) {
		if err := h.GatewayInteraction(ctx, ic.Interaction); err != nil {
			h.log.Error("discord interaction", "interaction", ic.ID, "type", ic.Type, "err", err)
		}
	})()
	if err := s.Open(); err != nil {
		return fmt.Errorf("discord gateway: %w", err)
	}
	h.log.Info("discord gateway connected")
	<-ctx.Done()
	return s.Close()
}
