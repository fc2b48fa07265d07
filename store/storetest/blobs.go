package storetest

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"
)

// Blobs checks a core.Blobs: the same bytes are one blob, a blob reads back
// whole, and an id it does not hold (or a path in disguise) is not found.
func Blobs(t *testing.T, b core.Blobs) {
	t.Helper()
	ctx := t.Context()
	png := []byte("\x89PNG\r\n\x1a\n" + strings.Repeat("\x00\xff", 40_000))
	id, err := b.PutBlob(ctx, png)
	if err != nil {
		t.Fatal(err)
	}
	if !core.ValidBlobID(id) || id != core.BlobID(png) {
		t.Fatalf("blob id %q, want %q", id, core.BlobID(png))
	}
	if again, err := b.PutBlob(ctx, png); err != nil || again != id {
		t.Fatalf("the same bytes again: %q, %v; want %q", again, err, id)
	}
	got, err := b.GetBlob(ctx, id)
	if err != nil || !bytes.Equal(got, png) {
		t.Fatalf("get: %d bytes, %v; want the %d put", len(got), err, len(png))
	}
	for _, bad := range []string{core.BlobID([]byte("never put")), "../../etc/passwd", ""} {
		if _, err := b.GetBlob(ctx, bad); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("GetBlob(%q) = %v, want not found", bad, err)
		}
	}
}
