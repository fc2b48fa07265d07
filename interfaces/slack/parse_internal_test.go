package slack

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// TestDecodeEnvelopeMatchesEncodingJSON: the one-pass decoder reads what
// encoding/json reads from every Events API sample, and refuses what it
// refuses.
func TestDecodeEnvelopeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	type jsonEvent struct {
		Type        string        `json:"type"`
		SubType     string        `json:"subtype"`
		User        string        `json:"user"`
		BotID       string        `json:"bot_id"`
		Username    string        `json:"username"`
		Text        string        `json:"text"`
		TS          string        `json:"ts"`
		ThreadTS    string        `json:"thread_ts"`
		Channel     string        `json:"channel"`
		ChannelType string        `json:"channel_type"`
		Team        string        `json:"team"`
		Files       []chat.InFile `json:"-"` // decodeFiles, checked in TestParseEvent
	}
	type jsonEnvelope struct {
		Type      string     `json:"type"`
		Challenge string     `json:"challenge"`
		TeamID    string     `json:"team_id"`
		EventID   string     `json:"event_id"`
		Event     *jsonEvent `json:"event"`
	}
	bodies := map[string]string{
		"escapes":          `{"type":"event_callback","event_id":"Ev1","event":{"type":"message","text":"a \"quoted\" \u00e9 \\n line\nnext","ts":"1.2","channel":"C1"}}`,
		"nulls":            `{"type":"event_callback","event_id":null,"event":{"type":"message","subtype":null,"ts":"1.2","channel":"C1"}}`,
		"null event":       `{"type":"event_callback","event_id":"Ev1","event":null}`,
		"nested unknown":   `{"type":"event_callback","event_id":"Ev1","x":{"type":"no"},"event":{"type":"message","blocks":[{"type":"rich_text","text":{"ts":"9"}}],"ts":"1.2","channel":"C1"}}`,
		"last key wins":    `{"type":"x","type":"event_callback","event_id":"Ev1","event":{"ts":"1","ts":"2","channel":"C1","type":"message"}}`,
		"number as string": `{"type":"event_callback","event_id":"Ev1","event":{"type":"message","ts":1.2,"channel":"C1"}}`,
		"event not object": `{"type":"event_callback","event_id":"Ev1","event":"message"}`,
		"array":            `[{"type":"event_callback"}]`,
		"truncated":        `{"type":"event_callback","event_id":"Ev1","event":{"type":"mess`,
		"trailing garbage": `{"type":"url_verification","challenge":"c"} x`,
	}
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bodies[f] = string(b)
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			var want jsonEnvelope
			wantErr := json.Unmarshal([]byte(body), &want)
			got, err := decodeEnvelope([]byte(body))
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("decodeEnvelope error = %v, encoding/json's = %v", err, wantErr)
			}
			if err != nil {
				return
			}
			if got.Type != want.Type || got.Challenge != want.Challenge || got.TeamID != want.TeamID || got.EventID != want.EventID {
				t.Errorf("envelope = %+v, encoding/json reads %+v", got, want)
			}
			if (got.Event == nil) != (want.Event == nil) {
				t.Fatalf("event = %+v, encoding/json reads %+v", got.Event, want.Event)
			}
			if got.Event != nil && !reflect.DeepEqual(withoutFiles(*got.Event), innerEvent(*want.Event)) {
				t.Errorf("event = %+v, encoding/json reads %+v", *got.Event, *want.Event)
			}
		})
	}
}

func withoutFiles(e innerEvent) innerEvent {
	e.Files = nil
	return e
}
