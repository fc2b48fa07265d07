package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/agentgate/agentgate/core"
)

// InFile is a file attached to an inbound message as its platform describes
// it. The inbox stores only this; the bytes are fetched when the message is
// processed (Attach).
type InFile struct {
	// Ref is what the platform's Fetcher takes: Slack's
	// url_private_download, a Discord attachment's url, a Telegram file_id.
	Ref  string `json:"ref"`
	Name string `json:"name"`
	MIME string `json:"mime,omitempty"`
	Size int64  `json:"size,omitempty"` // as the platform says; 0 when it does not
}

// Fetcher downloads an inbound file's bytes from its platform: at most max
// bytes, else an error.
type Fetcher interface {
	Fetch(ctx context.Context, f InFile, max int64) ([]byte, error)
}

// FetchRef is a Fetcher that downloads a file by its Ref (a platform
// client's Download).
type FetchRef func(ctx context.Context, ref string, max int64) ([]byte, error)

// Fetch implements Fetcher.
func (fn FetchRef) Fetch(ctx context.Context, f InFile, max int64) ([]byte, error) {
	return fn(ctx, f.Ref, max)
}

// DefaultMaxFileBytes is the largest attachment stored when an adapter is
// not told otherwise: 20 MB, the most the Telegram Bot API lets a bot
// download.
const DefaultMaxFileBytes = 20_000_000

// ErrFileTooLarge is in the error of a download refused because the file
// is larger than the limit its caller gave.
var ErrFileTooLarge = errors.New("file larger than the limit")

// ReadFile reads a downloaded file's body, of at most max bytes: a larger
// one (by its Content-Length, or once max+1 bytes came) is refused with
// ErrFileTooLarge without reading more.
func ReadFile(resp *http.Response, max int64) ([]byte, error) {
	tooLarge := fmt.Errorf("%w of %d bytes", ErrFileTooLarge, max)
	if resp.ContentLength > max {
		return nil, tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, tooLarge
	}
	return data, nil
}

// Files fetches the attachments of inbound messages and stores their bytes
// (core.Blobs) for the agent.
type Files struct {
	Blobs   core.Blobs // nil: files are only described to the agent
	Fetcher Fetcher
	Max     int64 // default DefaultMaxFileBytes
	Logger  *slog.Logger
	// TooLarge, when set, tells the person who sent files over Max that
	// they were not kept (text in plain words); best effort.
	TooLarge func(ctx context.Context, text string)
}

// Attach fetches and stores files, in order. A file that is too large or
// cannot be fetched is kept as a description with a note that says why, so
// the agent (and through it the person) knows: the message is never lost
// for its attachment. Only a failure to store is an error (retried).
func (f Files) Attach(ctx context.Context, files []InFile) ([]core.Attachment, error) {
	limit := f.Max
	if limit <= 0 {
		limit = DefaultMaxFileBytes
	}
	var out []core.Attachment
	var large []string
	for _, in := range files {
		a := core.Attachment{Name: fileName(in), MIME: in.MIME, Size: in.Size}
		switch {
		case in.Size > limit:
			a.Note = fmt.Sprintf("not stored: larger than the %s limit", core.ByteSize(limit))
			large = append(large, fmt.Sprintf("%s is %s", a.Name, core.ByteSize(in.Size)))
		case f.Blobs == nil || f.Fetcher == nil:
			a.Note = "not stored: this gateway keeps no attachments"
		default:
			data, err := f.Fetcher.Fetch(ctx, in, limit)
			if err != nil {
				f.log().Warn("attachment not fetched", "name", a.Name, "err", err)
				a.Note = "could not be fetched: " + err.Error()
				break
			}
			if a.ID, err = f.Blobs.PutBlob(ctx, data); err != nil {
				return nil, err
			}
			a.Size, a.MIME = int64(len(data)), sniff(in.MIME, data)
		}
		out = append(out, a)
	}
	// Told once the message is taken: a failure to store is retried, and
	// would tell the sender again at each attempt.
	if len(large) > 0 && f.TooLarge != nil {
		f.TooLarge(ctx, fmt.Sprintf("%s: the agent takes files up to %s. It was told the file was not kept.",
			strings.Join(large, ", "), core.ByteSize(limit)))
	}
	return out, nil
}

func (f Files) log() *slog.Logger {
	if f.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return f.Logger
}

// fileName is a file's name, or a stand-in for one the platform did not
// give (Telegram photos have none).
func fileName(f InFile) string {
	if f.Name != "" {
		return core.FileName(f.Name)
	}
	ext := ""
	if exts, _ := mime.ExtensionsByType(f.MIME); len(exts) > 0 {
		ext = exts[0]
	}
	return "file" + ext
}

// sniff is the type of data: an image is what its bytes say (a model is
// told the type of an image it is given, and a provider refuses a request
// whose "image" is not one); anything else is what the platform says,
// unless it said nothing, something generic, or an image it is not.
func sniff(declared string, data []byte) string {
	detected, _, _ := strings.Cut(http.DetectContentType(data), ";")
	declared, _, _ = strings.Cut(declared, ";")
	if strings.HasPrefix(detected, "image/") || strings.HasPrefix(declared, "image/") ||
		declared == "" || declared == "application/octet-stream" {
		return detected
	}
	return declared
}

// Start stores the attachments of inbound message in (files) and submits
// its run for agent in session sid, answering in conversation b, deduped
// by key. Its error is an InboxHandler's (SubmitOutcome).
func Start(ctx context.Context, eng Submitter, files Files, agent, sid, key string, in Inbound, b core.Binding) error {
	attached, err := files.Attach(ctx, in.Files)
	if err != nil {
		return err
	}
	b.Platform = in.Platform
	run, err := eng.Submit(ctx, core.SubmitRequest{
		AgentID: agent, Input: in.Text, SessionID: sid, UserID: in.UserID, StartedBy: Author(in), Type: core.RunTypeChat,
		Binding: b, Platform: in.Platform, DedupeKey: key, Attachments: attached,
	})
	if err != nil {
		return SubmitOutcome(err)
	}
	files.log().Info(in.Platform+" message accepted", "run", run.ID, "session", sid, "agent", agent)
	return nil
}
