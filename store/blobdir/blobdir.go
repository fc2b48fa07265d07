// Package blobdir keeps attachments' bytes as files in a directory (the
// embedded gateway's data dir): one file per blob, named by its content
// (core.BlobID), written to a temporary file and renamed, so a crash leaves
// either the whole blob or none (and a temporary file, which the blob prune
// removes: see BlobsStoredBefore).
package blobdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Dir is a blob directory. A blob's file time is when it was last stored:
// putting bytes that are there already sets it to now.
type Dir struct {
	path string
	// mu makes a put and a removal of one blob one after the other: a
	// put never returns the id of a blob that a removal then takes away.
	// (One gateway owns a data dir, so a mutex covers every writer.)
	mu sync.Mutex
}

// tempPrefix starts the name of a put's temporary file.
const tempPrefix = ".put-"

// TempGrace is the age under which a temporary file is never removed: a
// put may still be writing it.
const TempGrace = time.Hour

var (
	_ core.Blobs       = (*Dir)(nil)
	_ core.BlobRemover = (*Dir)(nil)
)

// Open returns the blob directory at path, creating it.
func Open(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("blob directory: %w", err)
	}
	return &Dir{path: path}, nil
}

// PutBlob implements core.Blobs.
func (d *Dir) PutBlob(_ context.Context, data []byte) (string, error) {
	id := core.BlobID(data)
	name := filepath.Join(d.path, id)
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := os.Stat(name); err == nil { // the same bytes are there: stored now
		now := time.Now()
		if err := os.Chtimes(name, now, now); err != nil {
			return "", fmt.Errorf("put blob: %w", err)
		}
		return id, nil
	}
	tmp, err := os.CreateTemp(d.path, tempPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("put blob: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing to remove
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err == nil {
		err = syncDir(d.path) // the rename survives a power loss, as the journal naming it does
	}
	if err != nil {
		return "", fmt.Errorf("put blob: %w", err)
	}
	return id, nil
}

// syncDir flushes directory dir's entries to disk.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// GetBlob implements core.Blobs. An id that is not a blob id names no file.
func (d *Dir) GetBlob(_ context.Context, id string) ([]byte, error) {
	if !core.ValidBlobID(id) {
		return nil, fmt.Errorf("blob %q: %w", id, core.ErrNotFound)
	}
	data, err := os.ReadFile(filepath.Join(d.path, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get blob: %w", err)
	}
	return data, nil
}

// BlobsStoredBefore implements core.BlobRemover: the blobs whose file time
// is before t. It also removes the temporary files of puts that never
// finished (the process was killed) written before t and more than
// TempGrace ago: they are no blobs, and nothing else would remove them.
func (d *Dir) BlobsStoredBefore(_ context.Context, t time.Time) ([]string, error) {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("list blobs: %w", err)
	}
	tempBefore := time.Now().Add(-TempGrace)
	if t.Before(tempBefore) {
		tempBefore = t
	}
	var ids, stale []string
	for _, e := range entries {
		temp := strings.HasPrefix(e.Name(), tempPrefix)
		if !e.Type().IsRegular() || (!temp && !core.ValidBlobID(e.Name())) {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list blobs: %w", err)
		}
		switch {
		case temp && info.ModTime().Before(tempBefore):
			stale = append(stale, e.Name())
		case !temp && info.ModTime().Before(t):
			ids = append(ids, e.Name())
		}
	}
	if err := d.removeTemps(stale); err != nil {
		return nil, err
	}
	return ids, nil
}

// removeTemps removes the temporary files names. It holds mu, so no put
// is writing one of them.
func (d *Dir) removeTemps(names []string) error {
	if len(names) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, name := range names {
		if err := os.Remove(filepath.Join(d.path, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove stale temporary file: %w", err)
		}
	}
	return nil
}

// RemoveBlob implements core.BlobRemover.
func (d *Dir) RemoveBlob(_ context.Context, id string, t time.Time) (bool, error) {
	if !core.ValidBlobID(id) {
		return false, nil
	}
	name := filepath.Join(d.path, id)
	d.mu.Lock()
	defer d.mu.Unlock()
	info, err := os.Stat(name)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !info.ModTime().Before(t)) {
		return false, nil
	}
	if err == nil {
		err = os.Remove(name)
	}
	if err != nil {
		return false, fmt.Errorf("remove blob: %w", err)
	}
	return true, nil
}
