//go:build unix

package gateway

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDataDir takes the data dir's lock file (agentgate.lock) so that a
// second gateway on the same embedded store refuses to start instead of
// acting as the same node. The lock is the kernel's: it goes with the
// process, however it ends (kill -9 included).
func lockDataDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, "agentgate.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &dirInUseError{dir: dir, pid: strings.TrimSpace(string(b))}
		}
		return nil, fmt.Errorf("data dir: lock %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { _ = f.Close() }, nil
}

// fileOwner returns the uid that owns fi.
func fileOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
