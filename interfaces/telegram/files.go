package telegram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// MaxCaptionLen is Telegram's limit on a photo's or document's caption, in
// UTF-16 code units after entity parsing.
const MaxCaptionLen = 1024

// maxPhotoBytes is the largest photo sendPhoto takes; a larger image goes
// as a document.
const maxPhotoBytes = 10 << 20

// Download fetches the file fileID (a photo's or document's file_id):
// getFile, then a GET of <APIURL>/file/bot<token>/<file_path>. A file whose
// file_size, or whose body, exceeds max bytes is refused (chat.ErrFileTooLarge)
// without reading more than max+1 bytes of it; the Bot API itself serves
// bots files of at most 20 MB. Error texts never hold the token.
func (c *Client) Download(ctx context.Context, fileID string, max int64) ([]byte, error) {
	if max <= 0 {
		return nil, fmt.Errorf("telegram file download: limit %d: must be positive", max)
	}
	var f *models.File
	err := c.pace.Call(ctx, "", func(ctx context.Context) (err error) {
		f, err = c.bot.GetFile(ctx, &bot.GetFileParams{FileID: fileID})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("telegram getFile: %w", err)
	}
	if f.FileSize > max {
		return nil, fmt.Errorf("telegram file download: %w of %d bytes", chat.ErrFileTooLarge, max)
	}
	if err := checkFilePath(f.FilePath); err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), c.cfg.Token, "***"))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.APIURL+"/file/bot"+c.cfg.Token+"/"+f.FilePath, nil)
	if err != nil {
		return nil, fmt.Errorf("telegram file download: API URL %q: must be an absolute http(s) URL", c.cfg.APIURL) // err quotes the token
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL holds the token
		}
		return nil, fmt.Errorf("telegram file download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, fmt.Errorf("telegram file download: HTTP %d: %s", resp.StatusCode, strings.ReplaceAll(excerpt(raw), c.cfg.Token, "***"))
	}
	data, err := chat.ReadFile(resp, max)
	if err != nil {
		return nil, fmt.Errorf("telegram file download: %w", err)
	}
	return data, nil
}

// checkFilePath refuses a file_path that is not a plain relative path
// ("documents/file_3.pdf"): it is joined to the download URL.
func checkFilePath(p string) error {
	bad := p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?#\\") || strings.Contains(p, "://")
	for seg := range strings.SplitSeq(p, "/") {
		bad = bad || seg == ".." || seg == "."
	}
	if bad {
		return fmt.Errorf("telegram file download: getFile answered file_path %q: not a relative path", p)
	}
	return nil
}

// SendFile posts data as a file named name in chat (in a forum topic when
// thread is set) and returns the message id: with sendPhoto for a PNG,
// JPEG or WebP image of at most 10 MB, else with sendDocument (a GIF too,
// which Telegram then shows animated), uploaded as multipart/form-data.
// caption is Markdown, converted to MarkdownV2 and cut to MaxCaptionLen. As
// with Send, a refusal returns an error and an unknown outcome one wrapping
// ErrMaybePosted.
func (c *Client) SendFile(ctx context.Context, chat int64, thread int, name, mime string, data []byte, caption string) (int, error) {
	if name == "" {
		name = "file"
	}
	if len(data) == 0 {
		return 0, fmt.Errorf("telegram send %s: the file is empty (Telegram refuses empty files)", name)
	}
	var mode models.ParseMode
	if strings.TrimSpace(caption) != "" {
		if parts := Split(caption, MaxCaptionLen); len(parts) > 0 {
			caption, mode = Markdown(parts[0]), models.ParseModeMarkdown
		}
	} else {
		caption = ""
	}
	var m *models.Message
	send := func(photo bool) error {
		return c.pace.Call(ctx, chatKey(chat), func(ctx context.Context) (err error) {
			upload := &models.InputFileUpload{Filename: name, Data: bytes.NewReader(data)}
			if photo {
				m, err = c.bot.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: chat, MessageThreadID: thread, Photo: upload,
					Caption: caption, ParseMode: mode})
			} else {
				m, err = c.bot.SendDocument(ctx, &bot.SendDocumentParams{ChatID: chat, MessageThreadID: thread, Document: upload,
					Caption: caption, ParseMode: mode})
			}
			return err
		})
	}
	photo := isPhoto(mime) && len(data) <= maxPhotoBytes
	err := send(photo)
	if photo && err != nil && apiError(err) {
		// Refused as a photo (its bytes, its dimensions): nothing was
		// posted, and a document takes any file.
		c.log.Info("telegram refused a photo; sending it as a document", "file", name, "err", err)
		err = send(false)
	}
	if err != nil {
		if !apiError(err) {
			return 0, fmt.Errorf("%w: %w", ErrMaybePosted, err)
		}
		return 0, err
	}
	if m == nil {
		return 0, fmt.Errorf("%w: the answer carried no message", ErrMaybePosted)
	}
	return m.ID, nil
}

// isPhoto reports whether a file of this MIME type goes with sendPhoto.
func isPhoto(mime string) bool {
	mime, _, _ = strings.Cut(strings.ToLower(strings.TrimSpace(mime)), ";")
	switch strings.TrimSpace(mime) {
	case "image/png", "image/jpeg", "image/jpg", "image/webp":
		return true
	}
	return false
}
