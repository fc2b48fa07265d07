package openai

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/fakeopenai"
)

func TestCheck(t *testing.T) {
	srv := fakeopenai.New()
	srv.APIKey, srv.Models = "sk-right", []string{"gpt-4o-mini"}
	url := srv.Start()
	defer srv.Close()
	for _, tc := range []struct {
		name, key, model string
		own              bool // as if BaseURL were OpenAI's own API
		refused          string
	}{
		{name: "key and model known", key: "sk-right", model: "gpt-4o-mini"},
		{name: "key refused", key: "sk-wrong", model: "gpt-4o-mini", refused: "the API key was refused"},
		{name: "unknown model on OpenAI's API", key: "sk-right", model: "gpt-5-typo", own: true, refused: `no model named "gpt-5-typo"`},
		{name: "unknown model on a compatible server", key: "sk-right", model: "llama-any"},
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
		t.Fatalf("checks were recorded as %d chat requests", n)
	}
	m, _ := New(Config{Model: "m", BaseURL: "http://127.0.0.1:1/v1"})
	if err := m.Check(t.Context()); err == nil || errors.Is(err, core.ErrModelRefused) {
		t.Fatalf("Check of an unreachable server = %v, want an error that is not a refusal", err)
	}
}
