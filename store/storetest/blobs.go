package storetest

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

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
	if rm, ok := b.(core.BlobRemover); ok {
		blobRemoval(t, b, rm)
	}
}

// blobRemoval checks a core.BlobRemover: blobs are listed by when they were
// last stored, putting the same bytes again makes a blob new, and a blob
// stored again since the cutoff is not removed.
func blobRemoval(t *testing.T, b core.Blobs, rm core.BlobRemover) {
	t.Helper()
	ctx := t.Context()
	put := func(s string) string {
		id, err := b.PutBlob(ctx, []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	stored := func(before time.Time) []string {
		ids, err := rm.BlobsStoredBefore(ctx, before)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	old, again := put("an old screenshot"), put("sent twice")
	time.Sleep(20 * time.Millisecond)
	cut := time.Now()
	time.Sleep(20 * time.Millisecond)
	fresh := put("a new report")
	if put("sent twice") != again {
		t.Fatal("the same bytes got another id")
	}
	ids := stored(cut)
	if !slices.Contains(ids, old) || slices.Contains(ids, again) || slices.Contains(ids, fresh) {
		t.Fatalf("stored before the cutoff: %v; want %s (and not the blob put again, nor the new one)", ids, old)
	}
	if removed, err := rm.RemoveBlob(ctx, again, cut); err != nil || removed {
		t.Fatalf("RemoveBlob of a blob stored again since the cutoff = %v, %v; want kept", removed, err)
	}
	if removed, err := rm.RemoveBlob(ctx, old, cut); err != nil || !removed {
		t.Fatalf("RemoveBlob(%s) = %v, %v; want removed", old, removed, err)
	}
	if _, err := b.GetBlob(ctx, old); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("GetBlob of a removed blob = %v, want not found", err)
	}
	if removed, err := rm.RemoveBlob(ctx, old, cut); err != nil || removed {
		t.Fatalf("RemoveBlob of a blob removed already = %v, %v; want false, nil", removed, err)
	}
	if got, err := b.GetBlob(ctx, again); err != nil || string(got) != "sent twice" {
		t.Fatalf("GetBlob of the blob kept = %q, %v", got, err)
	}
	if put("an old screenshot") != old || slices.Contains(stored(cut), old) {
		t.Fatalf("the removed bytes put again: listed as stored before the cutoff %v", stored(cut))
	}
	if got, err := b.GetBlob(ctx, old); err != nil || string(got) != "an old screenshot" {
		t.Fatalf("GetBlob of the bytes put again = %q, %v", got, err)
	}
}
