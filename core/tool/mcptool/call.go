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
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/tool/httptool"
)

// Limits on what one tool result gives the model (and the journal keeps).
const (
	// MaxContent is the most bytes of content (text, notes and the
	// truncation marker) of one result, the same as an HTTP tool's: a
	// longer content is cut at a UTF-8 boundary and ends with
	// "…[truncated N bytes]".
	MaxContent = httptool.MaxContent
	// MaxFileBytes is the largest image a tool may return as a file; a
	// larger one is only described.
	MaxFileBytes = 20_000_000
	// MaxFiles is the most images kept from one result, and MaxFilesBytes
	// their most bytes in all (two of the largest). The images past either
	// limit are only described.
	MaxFiles      = 8
	MaxFilesBytes = 2 * MaxFileBytes
)

// limits are the limits render applies; tests make them small.
type limits struct {
	content   int
	files     int
	fileBytes int
}

var resultLimits = limits{content: MaxContent, files: MaxFiles, fileBytes: MaxFilesBytes}

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
// and resource links are described by type and size. The content is cut
// to MaxContent bytes, and at most MaxFiles images of MaxFilesBytes in all
// are returned: the others are only described. See the package
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
	ctx, tooLarge := watchTooLarge(ctx)
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
	switch {
	case err != nil && tooLarge.Load():
		// Over HTTP the session is fine: only this response was cut off.
		return "", nil, tooLargeError(t, s.maxMessage)
	case err != nil && sess.tooLarge.Load():
		// Over stdio the process was stopped (the next call starts it
		// again); which call the message answered is not known.
		return "", nil, &core.ToolError{Message: fmt.Sprintf(
			"server %s sent a message larger than %s while tool %s ran; it was not read and the server was restarted: the call's outcome is unknown",
			s.name, core.ByteSize(s.maxMessage), t.name)}
	}
	if err != nil {
		err, answered := s.requestError(ctx, sess, op, err)
		if answered {
			// An error answer (unknown tool, invalid arguments): retrying
			// would get the same.
			return "", nil, &core.ToolError{Message: fmt.Sprintf("tool %s of server %s failed: %v", t.name, s.name, unwrapAnswer(err))}
		}
		return "", nil, err
	}
	content, files := render(res, resultLimits)
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
// it returned, within lim.
func render(res *mcp.CallToolResult, lim limits) (string, []core.File) {
	var parts []string
	var files []core.File
	hasText, images, fileBytes := false, 0, 0
	for _, c := range res.Content {
		switch c := c.(type) {
		case mcp.TextContent:
			parts = append(parts, c.Text)
			hasText = true
		case mcp.ImageContent:
			images++
			mt := mediaType(c.MIMEType)
			name := fmt.Sprintf("image-%d%s", images, extension(mt))
			if len(files) == lim.files { // not decoded: it is not kept
				parts = append(parts, fmt.Sprintf("[image %s, %s: over the limit of %d images per result, not kept]", name, mt, lim.files))
				continue
			}
			data, ok := decode64(c.Data)
			switch {
			case !ok:
				parts = append(parts, fmt.Sprintf("[image %s, %s: invalid base64 data]", name, mt))
			case len(data) > MaxFileBytes:
				parts = append(parts, fmt.Sprintf("[image %s, %s, %d bytes: larger than %s, not kept]", name, mt, len(data), core.ByteSize(MaxFileBytes)))
			case fileBytes+len(data) > lim.fileBytes:
				parts = append(parts, fmt.Sprintf("[image %s, %s, %d bytes: over the limit of %s of images per result, not kept]",
					name, mt, len(data), core.ByteSize(int64(lim.fileBytes))))
			default:
				fileBytes += len(data)
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
	return joinCut(parts, lim.content), files
}

// joinCut is parts joined with newlines, at most limit bytes: a longer
// text is cut at a UTF-8 boundary and ends with "…[truncated N bytes]",
// the marker within limit. Only what is kept is copied.
func joinCut(parts []string, limit int) string {
	total := max(len(parts)-1, 0)
	for _, p := range parts {
		total += len(p)
	}
	if total <= limit {
		return strings.Join(parts, "\n")
	}
	const reserve = 64 // room for the marker
	keep := max(limit-reserve, 0)
	// keep bytes and the next one, to find where a rune starts.
	buf := make([]byte, 0, keep+1)
	for i, p := range parts {
		if i > 0 {
			buf = append(buf, '\n')
		}
		buf = append(buf, p[:min(len(p), cap(buf)-len(buf))]...)
		if len(buf) == cap(buf) {
			break
		}
	}
	for keep > 0 && !utf8.RuneStart(buf[keep]) {
		keep--
	}
	return fmt.Sprintf("%s…[truncated %d bytes]", buf[:keep], total-keep)
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
