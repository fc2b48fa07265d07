//go:build !unix

package gateway

import "os"

// lockDataDir is a no-op where flock is not available: run one gateway per
// data dir.
func lockDataDir(string) (func(), error) { return func() {}, nil }

// fileOwner is unknown where files have no unix owner.
func fileOwner(os.FileInfo) (int, bool) { return 0, false }
