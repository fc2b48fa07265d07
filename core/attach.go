package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// Attachment is a file someone gave an agent with their message: a chat
// file share, a photo, a document. Its bytes are in the blob store under
// ID; the journal keeps only this description.
type Attachment struct {
	ID   string `json:"id,omitempty"` // blob id; empty when the file was not stored (Note says why)
	Name string `json:"name"`
	MIME string `json:"mime,omitempty"`
	Size int64  `json:"size"`
	// Note, for a file that was not stored (too large, not fetched), says
	// why; the agent is told.
	Note string `json:"note,omitempty"`
}

// Image reports whether a is a stored image a model may look at.
func (a Attachment) Image() bool {
	switch a.MIME {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return a.ID != ""
	}
	return false
}

// Describe is the line that tells a model of a (when it does not see it
// as an image): its name, type and size, and a note.
func (a Attachment) Describe() string {
	s := fmt.Sprintf("[attached: %s (%s, %s)", a.Name, orUnknown(a.MIME), ByteSize(a.Size))
	if a.Note != "" {
		s += ": " + a.Note
	}
	return s + "]"
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

// ByteSize renders n bytes for people: "812 B", "14.2 KB", "3.1 MB".
func ByteSize(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f KB", float64(n)/1000)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// File is an attachment with its bytes, as a model is given it.
type File struct {
	Attachment
	Data []byte `json:"-"`
}

// Blobs keeps attachments' bytes. A blob is named by its content (BlobID):
// putting the same bytes twice stores them once, and a retried put is
// harmless.
type Blobs interface {
	PutBlob(ctx context.Context, data []byte) (id string, err error)
	// GetBlob returns ErrNotFound for an id it does not hold.
	GetBlob(ctx context.Context, id string) ([]byte, error)
}

// BlobID is the id of a blob holding data: "sha256-" and its hex digest.
func BlobID(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256-" + hex.EncodeToString(sum[:])
}

var blobIDPattern = regexp.MustCompile(`^sha256-[0-9a-f]{64}$`)

// ValidBlobID reports whether id is a well-formed blob id (nothing else
// may name a file in a blob directory).
func ValidBlobID(id string) bool { return blobIDPattern.MatchString(id) }

// userContent is what a model reads of a user message with attachments
// it does not see as images.
func userContent(text string, files []Attachment, images bool) string {
	var b strings.Builder
	b.WriteString(text)
	for _, f := range files {
		if images && f.Image() {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(f.Describe())
	}
	return b.String()
}
