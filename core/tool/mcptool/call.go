package mcptool

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentgate/agentgate/core"
)

// MaxFileBytes is the largest image a tool may return as a file; a larger
// one is only described.
const MaxFileBytes = 20_000_000

// tool is one tool of a Server.
type tool struct {
	s    *Server
	name string
}

var _ core.FileTool = (*tool)(nil)

// Call is CallFiles for callers that take text only; the text describes
// the images all the same.
func (t *tool) Call(ctx context.Context, args json.RawMessage, idempotencyKey string) (string, error) {
	content, _, err := t.CallFiles(ctx, args, idempotencyKey)
	return content, err
}

// CallFiles calls the tool (tools/call) with args, a JSON object, and the
// idempotency key in _meta (IdempotencyKeyMeta), starting the server if it
// is not running. The content is the result's text items joined with
// newlines, with the text of embedded text resources; when the result has
// no text, its structuredContent as JSON comes first. Each image is
// returned as a file named image-N.<ext> and described in the content as
// "[image image-1.png, image/png, 1234 bytes]"; audio, binary resources
// and resource links are described by type and size. See the package
// documentation for which errors are a *core.ToolError and which are
// retried.
func (t *tool) CallFiles(ctx context.Context, args json.RawMessage, idempotencyKey string) (string, []core.File, error) {
	s := t.s
	if !s.allowed(t.name) {
		return "", nil, &core.ToolError{Message: fmt.Sprintf("tool %s of server %s is not allowed", t.name, s.name)}
	}
	arguments, err := objectArgs(args)
	if err != nil {
		return "", nil, &core.ToolError{Message: fmt.Sprintf("tool %s of server %s: %v", t.name, s.name, err)}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, errTimeout)
	defer cancel()
	op := "call " + t.name
	sess, err := s.session(ctx)
	if err != nil {
		return "", nil, s.waitError(ctx, op, err)
	}
	var req mcp.CallToolRequest
	req.Params.Name = t.name
	req.Params.Arguments = arguments
	if idempotencyKey != "" {
		req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{IdempotencyKeyMeta: idempotencyKey}}
	}
	res, err := sess.c.CallTool(ctx, req)
	if err != nil {
		err, answered := s.requestError(ctx, sess, op, err)
		if answered {
			// An error answer (unknown tool, invalid arguments): retrying
			// would get the same.
			return "", nil, &core.ToolError{Message: fmt.Sprintf("tool %s of server %s failed: %v", t.name, s.name, unwrapAnswer(err))}
		}
		return "", nil, err
	}
	content, files := render(res)
	if res.IsError {
		msg := content
		if strings.TrimSpace(msg) == "" {
			msg = fmt.Sprintf("tool %s of server %s reported an error", t.name, s.name)
		}
		return "", nil, &core.ToolError{Message: msg}
	}
	return content, files, nil
}

// unwrapAnswer is the server's error answer without this package's
// prefix.
func unwrapAnswer(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// objectArgs checks that args is a JSON object; empty or null is {}.
func objectArgs(args json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	if trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, fmt.Errorf("arguments must be a JSON object")
	}
	return json.RawMessage(trimmed), nil
}

// render turns a tool result into the text the model reads and the files
// it returned.
func render(res *mcp.CallToolResult) (string, []core.File) {
	var parts []string
	var files []core.File
	hasText, images := false, 0
	for _, c := range res.Content {
		switch c := c.(type) {
		case mcp.TextContent:
			parts = append(parts, c.Text)
			hasText = true
		case mcp.ImageContent:
			images++
			mt := mediaType(c.MIMEType)
			data, ok := decode64(c.Data)
			name := fmt.Sprintf("image-%d%s", images, extension(mt))
			switch {
			case !ok:
				parts = append(parts, fmt.Sprintf("[image %s, %s: invalid base64 data]", name, mt))
			case len(data) > MaxFileBytes:
				parts = append(parts, fmt.Sprintf("[image %s, %s, %d bytes: larger than %s, not kept]", name, mt, len(data), core.ByteSize(MaxFileBytes)))
			default:
				files = append(files, core.File{
					Attachment: core.Attachment{Name: name, MIME: mt, Size: int64(len(data))},
					Data:       data,
				})
				parts = append(parts, fmt.Sprintf("[image %s, %s, %d bytes]", name, mt, len(data)))
			}
		case mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s, %s]", mediaType(c.MIMEType), size64(c.Data)))
		case mcp.EmbeddedResource:
			switch r := c.Resource.(type) {
			case mcp.TextResourceContents:
				parts = append(parts, r.Text)
				hasText = true
			case mcp.BlobResourceContents:
				parts = append(parts, fmt.Sprintf("[resource %s, %s, %s]", r.URI, mediaType(r.MIMEType), size64(r.Blob)))
			default:
				parts = append(parts, "[resource]")
			}
		case mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link %s, %s]", c.URI, mediaType(c.MIMEType)))
		default:
			parts = append(parts, fmt.Sprintf("[%s content]", contentType(c)))
		}
	}
	if !hasText {
		if js := structured(res); js != "" {
			parts = append([]string{js}, parts...)
		}
	}
	return strings.Join(parts, "\n"), files
}

// structured is the result's structuredContent as JSON, or "".
func structured(res *mcp.CallToolResult) string {
	if len(res.RawStructuredContent) > 0 {
		return string(res.RawStructuredContent)
	}
	if res.StructuredContent == nil {
		return ""
	}
	js, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return ""
	}
	return string(js)
}

func decode64(s string) ([]byte, bool) {
	s = strings.TrimSpace(s)
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, true
	}
	if b, err := base64.RawStdEncoding.DecodeString(s); err == nil {
		return b, true
	}
	return nil, false
}

// size64 is the size of base64 data, for a description.
func size64(s string) string {
	if b, ok := decode64(s); ok {
		return fmt.Sprintf("%d bytes", len(b))
	}
	return "invalid base64 data"
}

// mediaType is t without parameters, lower case; unknown when empty or
// malformed.
func mediaType(t string) string {
	mt, _, err := mime.ParseMediaType(t)
	if err != nil || mt == "" {
		return "application/octet-stream"
	}
	return mt
}

// extension is the file name extension for media type mt.
func extension(mt string) string {
	switch mt {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	case "image/svg+xml":
		return ".svg"
	}
	if exts, _ := mime.ExtensionsByType(mt); len(exts) > 0 {
		return exts[0]
	}
	return ""
}

// contentType is the "type" of a content item of a kind not handled.
func contentType(c mcp.Content) string {
	js, err := json.Marshal(c)
	if err == nil {
		var v struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(js, &v) == nil && v.Type != "" {
			return v.Type
		}
	}
	return fmt.Sprintf("%T", c)
}
