package routine

import (
	"fmt"
	"net/url"
	"strings"
)

// Target kinds of deliver_to.
const (
	TargetNone     = "none"
	TargetWebhook  = "webhook"
	TargetSlack    = "slack"
	TargetDiscord  = "discord"
	TargetTelegram = "telegram"
)

// Target is a parsed deliver_to value.
type Target struct {
	Kind string // none, webhook, slack, discord or telegram
	// Dest is the URL (webhook), channel (slack, discord) or chat (telegram).
	Dest string
}

// Chat reports whether the target is a chat platform (delivered by the chat
// interfaces).
func (t Target) Chat() bool {
	return t.Kind == TargetSlack || t.Kind == TargetDiscord || t.Kind == TargetTelegram
}

// ParseTarget parses deliver_to: none (or empty), webhook:<absolute http(s)
// URL>, slack:<channel>, discord:<channel> or telegram:<chat>.
func ParseTarget(s string) (Target, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == TargetNone {
		return Target{Kind: TargetNone}, nil
	}
	kind, dest, ok := strings.Cut(s, ":")
	dest = strings.TrimSpace(dest)
	switch {
	case !ok:
	case kind == TargetWebhook:
		u, err := url.Parse(dest)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Target{}, fmt.Errorf("webhook: must be an absolute http(s) URL, like webhook:https://example.com/hook, got %q", dest)
		}
		return Target{Kind: kind, Dest: dest}, nil
	case kind == TargetSlack || kind == TargetDiscord || kind == TargetTelegram:
		if dest == "" {
			return Target{}, fmt.Errorf("%s: name the channel or chat, like %s:C0123456789", kind, kind)
		}
		return Target{Kind: kind, Dest: dest}, nil
	}
	return Target{}, fmt.Errorf("must be slack:<channel>, discord:<channel>, telegram:<chat>, webhook:<url> or none, got %q", s)
}
