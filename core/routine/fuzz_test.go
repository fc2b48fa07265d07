package routine_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core/routine"
)

// FuzzParseTarget feeds deliver_to values (from the config file and from
// POST/PATCH /api/v1/routines bodies) to ParseTarget: an accepted target has
// a known kind and a destination of that kind's shape, and reads back as
// itself from its kind:dest form.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{
		"", "none", " none ", "webhook:https://example.com/hook?x=1", "webhook:http://127.0.0.1:8080/hook",
		"slack:C0123", "slack: C0123456789 ", "discord:1100000000000000001", "telegram:-1001234567890",
		"webhook:ftp://x", "webhook:", "webhook:https://", "webhook:https://ex ample.com", "telegram:", "pager:x", "slack",
		"slack:#ops:x", "webhook:https://user:pass@example.com/h#frag", "discord:\x00", "none:x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := routine.ParseTarget(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("ParseTarget(%q): empty error", s)
			}
			return
		}
		if got.Dest != strings.TrimSpace(got.Dest) {
			t.Fatalf("ParseTarget(%q) = %+v: destination not trimmed", s, got)
		}
		switch got.Kind {
		case routine.TargetNone:
			if got.Dest != "" || got.Chat() {
				t.Fatalf("ParseTarget(%q) = %+v: none with a destination", s, got)
			}
			return
		case routine.TargetWebhook:
			u, err := url.Parse(got.Dest)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || got.Chat() {
				t.Fatalf("ParseTarget(%q) = %+v: webhook without an absolute http(s) URL", s, got)
			}
		case routine.TargetSlack, routine.TargetDiscord, routine.TargetTelegram:
			if got.Dest == "" || !got.Chat() {
				t.Fatalf("ParseTarget(%q) = %+v: chat target without a channel", s, got)
			}
		default:
			t.Fatalf("ParseTarget(%q) = %+v: unknown kind", s, got)
		}
		again, err := routine.ParseTarget(got.Kind + ":" + got.Dest)
		if err != nil || again != got {
			t.Fatalf("ParseTarget(%q) = %+v, but its kind:dest form reads as %+v, %v", s, got, again, err)
		}
	})
}
