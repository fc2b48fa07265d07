package blobdir_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/retention"
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

// noRefs is a journal that names no blob.
type noRefs struct{}

func (noRefs) BlobRefs(context.Context) (map[string]bool, error) { return map[string]bool{}, nil }

// TestPruneRemovesStaleTempFiles: a put interrupted by a crash leaves its
// temporary file; the blob prune removes it once it is older than both the
// cutoff and blobdir.TempGrace, and never one a put may still be writing.
func TestPruneRemovesStaleTempFiles(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name   string
		age    time.Duration // of the temporary file
		cutoff time.Duration // the prune's cutoff, before now
		kept   bool
	}{
		{name: "stale", age: 2 * time.Hour, cutoff: time.Minute},
		{name: "written in the last hour", age: 10 * time.Minute, cutoff: time.Minute, kept: true},
		{name: "younger than the cutoff", age: 2 * time.Hour, cutoff: 3 * time.Hour, kept: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := t.TempDir()
			d, err := blobdir.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			id, err := d.PutBlob(t.Context(), []byte("a blob"))
			if err != nil {
				t.Fatal(err)
			}
			temp := filepath.Join(path, ".put-123456")
			if err := os.WriteFile(temp, []byte("half a blob"), 0o600); err != nil {
				t.Fatal(err)
			}
			mtime := now.Add(-tt.age)
			if err := os.Chtimes(temp, mtime, mtime); err != nil {
				t.Fatal(err)
			}
			prune := retention.Blobs{Refs: noRefs{}, Store: d}
			if _, err := prune.Prune(t.Context(), core.PruneBlobs, now.Add(-tt.cutoff), 100); err != nil {
				t.Fatalf("Prune: %v", err)
			}
			want := []string{id}
			if tt.kept {
				want = append(want, ".put-123456")
			}
			var got []string
			ents, err := os.ReadDir(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				got = append(got, e.Name())
			}
			if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
				t.Errorf("files after the prune = %v, want %v", got, want)
			}
		})
	}
}
