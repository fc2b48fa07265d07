package openai

import (
	"context"
	"errors"

	"github.com/openai/openai-go/v3"

	"github.com/agentgate/agentgate/core"
)

// clientGenerate is Generate as it was when it read the stream through the
// client's own ssestream.Stream and ChatCompletionAccumulator: the reference
// FuzzGenerateMatchesClient holds Generate to.
func (m *Model) clientGenerate(ctx context.Context, req core.ModelRequest, onDelta func(text string)) (core.ModelResponse, error) {
	params, err := m.params(req)
	if err != nil {
		return core.ModelResponse{}, m.wrap(err)
	}
	stream := m.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()

	var (
		acc      openai.ChatCompletionAccumulator
		id       string
		finished bool
		reason   string
		usage    openai.CompletionUsage
	)
	for stream.Next() {
		chunk := stream.Current()
		// The accumulator drops chunks whose id differs from the first's;
		// some servers mint one per chunk.
		if id == "" {
			id = chunk.ID
		}
		chunk.ID = id
		if !acc.AddChunk(chunk) {
			return core.ModelResponse{}, m.wrap(errors.New("stream: chunk does not fit the response so far"))
		}
		if chunk.JSON.Usage.Valid() {
			usage = chunk.Usage
		}
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue
			}
			if c.FinishReason != "" {
				finished = true
				reason = c.FinishReason
			}
			if onDelta != nil {
				if c.Delta.Content != "" {
					onDelta(c.Delta.Content)
				}
				if c.Delta.Refusal != "" {
					onDelta(c.Delta.Refusal)
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		return core.ModelResponse{}, m.wrap(err)
	}
	if err := ctx.Err(); err != nil {
		return core.ModelResponse{}, m.wrap(err)
	}
	if !finished {
		return core.ModelResponse{}, m.wrap(errors.New("stream: ended before the model finished its turn"))
	}

	resp := core.ModelResponse{
		Usage:      core.Usage{InputTokens: usage.PromptTokens, OutputTokens: usage.CompletionTokens},
		StopReason: reason,
	}
	if len(acc.Choices) == 0 {
		return resp, nil
	}
	msg := acc.Choices[0].Message
	resp.Text = msg.Content
	if resp.Text == "" {
		resp.Text = msg.Refusal
	}
	for _, tc := range msg.ToolCalls {
		if tc.ID == "" && tc.Function.Name == "" && tc.Function.Arguments == "" {
			continue
		}
		id := tc.ID
		if id == "" {
			id = core.NewID("call")
		}
		resp.ToolCalls = append(resp.ToolCalls, core.ToolCall{
			ID:        id,
			Name:      tc.Function.Name,
			Arguments: arguments(tc.Function.Arguments),
		})
	}
	return resp, nil
}
