//go:build !unix

package gateway

// lockDataDir is a no-op where flock is not available: run one gateway per
// data dir.
func lockDataDir(string) (func(), error) { return func() {}, nil }
