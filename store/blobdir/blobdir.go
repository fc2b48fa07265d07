// Package blobdir keeps attachments' bytes as files in a directory (the
// embedded gateway's data dir): one file per blob, named by its content
// (core.BlobID), written to a temporary file and renamed, so a crash leaves
// either the whole blob or none.
package blobdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentgate/agentgate/core"
)

// Dir is a blob directory.
type Dir struct{ path string }

var _ core.Blobs = (*Dir)(nil)

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
	if _, err := os.Stat(name); err == nil {
		return id, nil // the same bytes are there
	}
	tmp, err := os.CreateTemp(d.path, ".put-*")
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
	if err != nil {
		return "", fmt.Errorf("put blob: %w", err)
	}
	return id, nil
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
