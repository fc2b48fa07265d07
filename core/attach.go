package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
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

// FileName is name as a file is named where it is kept and uploaded: its
// last path element, without control characters (a CR/LF in a tool's
// Content-Disposition would reach the multipart headers of an upload) or
// bidirectional overrides ("invoice\u202efdp.exe" shows as "invoiceexe.pdf"),
// at most 200 bytes; "file" when nothing is left.
func FileName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		switch {
		case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0, r == utf8.RuneError,
			r >= '\u200e' && r <= '\u200f', r >= '\u2028' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
			return -1
		}
		return r
	}, name)
	for len(name) > 200 {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	if name = strings.TrimSpace(name); name == "" || name == "." || name == ".." {
		return "file"
	}
	return name
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
// harmless. Putting bytes that are stored already marks them stored now,
// so retention (BlobRemover) keeps them for the message about to name
// them.
type Blobs interface {
	PutBlob(ctx context.Context, data []byte) (id string, err error)
	// GetBlob returns ErrNotFound for an id it does not hold.
	GetBlob(ctx context.Context, id string) ([]byte, error)
}

// BlobRemover is a Blobs whose blobs retention removes once nothing names
// them (see PruneBlobs).
type BlobRemover interface {
	// BlobsStoredBefore returns the ids of the blobs last stored before t.
	BlobsStoredBefore(ctx context.Context, t time.Time) ([]string, error)
	// RemoveBlob removes blob id unless it was stored (put) again at or
	// after t, and reports whether it removed it. A put and a removal of
	// the same blob never interleave: the blob is there after the put.
	RemoveBlob(ctx context.Context, id string, t time.Time) (bool, error)
}

// BlobReferrer is a store whose journal names blobs: the attachments of
// user messages and the files tools returned.
type BlobReferrer interface {
	// BlobRefs returns the id of every blob the journal names.
	BlobRefs(ctx context.Context) (map[string]bool, error)
}

// BlobIDs returns the blob ids named in data (an event's JSON), each once,
// in order.
func BlobIDs(data []byte) []string {
	var out []string
	for _, m := range blobIDInText.FindAll(data, -1) {
		if id := string(m); !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

var blobIDInText = regexp.MustCompile(`sha256-[0-9a-f]{64}`)

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
