// Package demo is an offline, deterministic model so that a new user with no
// API key sees a conversation, a tool call and an approval.
//
// What it answers, given the conversation:
//   - When the last message is a tool result, it reports it: "The deploy tool
//     returned: …", or, when the call failed or was refused, "The deploy call did
//     not go through: …".
//   - When the user's message names one of the agent's tools (a whole word,
//     e.g. "deploy web to staging"), it calls that tool. Arguments are filled
//     from the message: a string property with an enum takes the enum value the
//     message mentions (else the first one); any other string property takes
//     the word after the tool's name (else "demo").
//   - Otherwise it greets, repeats what it was told, says how many earlier
//     messages of the session it sees, and suggests a tool to try.
//
// Replies stream word by word.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/agentgate/agentgate/core"
)

// Model is the demo model. The zero value is ready to use.
type Model struct{}

var _ core.Model = Model{}

var wordRE = regexp.MustCompile(`[\p{L}\p{N}_.-]+`)

// Generate answers deterministically from req.
func (Model) Generate(ctx context.Context, req core.ModelRequest, onDelta func(string)) (core.ModelResponse, error) {
	if err := ctx.Err(); err != nil {
		return core.ModelResponse{}, err
	}
	resp := answer(req)
	if resp.Text != "" && onDelta != nil {
		words := strings.SplitAfter(resp.Text, " ")
		for _, w := range words {
			onDelta(w)
		}
	}
	in := 0
	for _, m := range req.Messages {
		in += len(strings.Fields(m.Content))
	}
	resp.Usage = core.Usage{InputTokens: int64(in), OutputTokens: int64(len(strings.Fields(resp.Text)) + len(resp.ToolCalls))}
	return resp, nil
}

func answer(req core.ModelRequest) core.ModelResponse {
	if len(req.Messages) == 0 {
		return core.ModelResponse{Text: "Hello! Say something and I will answer."}
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == core.RoleTool {
		if strings.HasPrefix(last.Content, "error:") || strings.Contains(last.Content, "did not run") {
			return core.ModelResponse{Text: fmt.Sprintf("The %s call did not go through: %s", last.Name, last.Content)}
		}
		return core.ModelResponse{Text: fmt.Sprintf("The %s tool returned: %s", last.Name, last.Content)}
	}
	text := last.Content
	words := wordRE.FindAllString(strings.ToLower(text), -1)
	for _, t := range req.Tools {
		for i, w := range words {
			if w != strings.ToLower(t.Name) {
				continue
			}
			next := "demo"
			if i+1 < len(words) {
				next = words[i+1]
			}
			args := arguments(t.Parameters, words, next)
			return core.ModelResponse{
				Text:      fmt.Sprintf("I will call %s.", t.Name),
				ToolCalls: []core.ToolCall{{ID: "call_" + t.Name, Name: t.Name, Arguments: args}},
			}
		}
	}
	earlier := 0
	for _, m := range req.Messages[:len(req.Messages)-1] {
		if m.Role == core.RoleUser {
			earlier++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Hello! I am the offline demo agent. You said: %q.", strings.TrimSpace(text))
	if earlier > 0 {
		prev := ""
		for i := len(req.Messages) - 2; i >= 0; i-- {
			if req.Messages[i].Role == core.RoleUser {
				prev = req.Messages[i].Content
				break
			}
		}
		fmt.Fprintf(&b, " I remember %d earlier message(s) in this session; the last one was %q.", earlier, prev)
	}
	if len(req.Tools) > 0 {
		names := make([]string, len(req.Tools))
		for i, t := range req.Tools {
			names[i] = t.Name
		}
		fmt.Fprintf(&b, " Try a tool: mention one of %s (for example %q).", strings.Join(names, ", "), example(req.Tools[0].Name))
	}
	return core.ModelResponse{Text: b.String()}
}

func example(tool string) string {
	if tool == "deploy" {
		return "deploy web to staging"
	}
	return tool + " please"
}

// arguments fills the string properties of a JSON Schema from the words.
func arguments(schema json.RawMessage, words []string, next string) json.RawMessage {
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
			Enum []any  `json:"enum"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s) // a schema we cannot read gets no arguments
	args := map[string]any{}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := s.Properties[n]
		if p.Type != "string" {
			continue
		}
		if len(p.Enum) > 0 {
			args[n] = p.Enum[0]
			for _, e := range p.Enum {
				if es, ok := e.(string); ok && containsWord(words, strings.ToLower(es)) {
					args[n] = es
					break
				}
			}
			continue
		}
		args[n] = next
	}
	b, _ := json.Marshal(args) // a map of strings always marshals
	return b
}

func containsWord(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}
