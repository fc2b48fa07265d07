package anthropic

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/fakeanthropic"
)

func TestCheck(t *testing.T) {
	srv := fakeanthropic.New()
	srv.APIKey, srv.Models = "sk-ant-right", []string{"claude-sonnet-4-5"}
	url := srv.Start()
	defer srv.Close()
	for _, tc := range []struct {
		name, key, model string
		own              bool // as if BaseURL were Anthropic's own API
		refused          string
	}{
		{name: "key and model known", key: "sk-ant-right", model: "claude-sonnet-4-5"},
		{name: "key refused", key: "sk-ant-wrong", model: "claude-sonnet-4-5", refused: "the API key was refused"},
		{name: "unknown model on Anthropic's API", key: "sk-ant-right", model: "claude-typo", own: true, refused: `no model named "claude-typo"`},
		{name: "unknown model behind a proxy", key: "sk-ant-right", model: "claude-typo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Config{Model: tc.model, BaseURL: url, APIKey: tc.key})
			if err != nil {
				t.Fatal(err)
			}
			m.ownAPI = tc.own
			err = m.Check(t.Context())
			switch {
			case tc.refused == "" && errors.Is(err, core.ErrModelRefused):
				t.Fatalf("Check = %v, want no refusal", err)
			case tc.refused != "" && (!errors.Is(err, core.ErrModelRefused) || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("Check = %v, want a refusal saying %q", err, tc.refused)
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("checks were recorded as %d message requests", n)
	}
}
