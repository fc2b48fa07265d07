package blobdir_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/blobdir"
	"github.com/agentgate/agentgate/store/storetest"
)

func TestBlobsSuite(t *testing.T) {
	t.Parallel()
	d, err := blobdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	storetest.Blobs(t, d)
}

func TestBlobDir(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "blobs")
	d, err := blobdir.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	png := []byte("\x89PNG\r\n\x1a\nnot really")
	id, err := d.PutBlob(t.Context(), png)
	if err != nil {
		t.Fatal(err)
	}
	again, err := d.PutBlob(t.Context(), png)
	if err != nil || again != id {
		t.Fatalf("the same bytes again: %q, %v; want %q", again, err, id)
	}
	got, err := d.GetBlob(t.Context(), id)
	if err != nil || !bytes.Equal(got, png) {
		t.Fatalf("get = %q, %v", got, err)
	}
	ents, _ := os.ReadDir(path)
	if len(ents) != 1 {
		t.Errorf("%d files in the directory, want one blob and no leftovers", len(ents))
	}
	for _, bad := range []string{"../../etc/passwd", "sha256-" + string(bytes.Repeat([]byte("0"), 63)), ".put-1", ""} {
		if _, err := d.GetBlob(t.Context(), bad); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("GetBlob(%q) = %v, want not found", bad, err)
		}
	}
	if _, err := d.GetBlob(t.Context(), core.BlobID([]byte("never put"))); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("a blob never put: %v, want not found", err)
	}
}
