package gateway

import (
	"bytes"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log sink safe for the store's background goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestDataDirPrivate: the embedded store's data dir ends 0700 and its
// database files 0600, whatever the umask made of a dir created before the
// first start; tightening a dir is logged.
func TestDataDirPrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix file modes")
	}
	t.Parallel()
	tests := []struct {
		name    string
		premode fs.FileMode // 0: the dir does not exist before the start
		warned  bool
	}{
		{name: "created by serve"},
		{name: "existing 0755", premode: 0o755, warned: true},
		{name: "existing 0770", premode: 0o770, warned: true},
		{name: "existing 0700", premode: 0o700},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "data")
			if tt.premode != 0 {
				if err := os.Mkdir(dir, tt.premode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, tt.premode); err != nil { // whatever the umask
					t.Fatal(err)
				}
			}
			var logs lockedBuffer
			b, err := openBackend(t.Context(), Settings{DataDir: dir}.withDefaults(), slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer b.close()
			want := map[string]fs.FileMode{"": 0o700, "agentgate.db": 0o600, "agentgate.db-wal": 0o600, "agentgate.db-shm": 0o600}
			for name, mode := range want {
				fi, err := os.Stat(filepath.Join(dir, name))
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if got := fi.Mode().Perm(); got != mode {
					t.Errorf("%s: mode %v, want %v", filepath.Join(dir, name), got, mode)
				}
			}
			if warned := strings.Contains(logs.String(), "level=WARN msg=\"data dir was open to other users"); warned != tt.warned {
				t.Errorf("warned about the mode: %v, want %v; logs:\n%s", warned, tt.warned, logs.String())
			}
		})
	}
}

// The embedded store has a janitor too: a run whose job was dead-lettered
// (its step interrupted at every delivery) gets one again without a
// restart; AGENTGATE_JANITOR_INTERVAL sets how often.
func TestEmbeddedJanitor(t *testing.T) {
	for _, tt := range []struct {
		set, want time.Duration
	}{{0, embeddedJanitor}, {time.Minute, time.Minute}} {
		b, err := openBackend(t.Context(), Settings{DataDir: t.TempDir(), JanitorInterval: tt.set}.withDefaults(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if b.janitor != tt.want {
			t.Errorf("janitor with AGENTGATE_JANITOR_INTERVAL=%s: %s, want %s", tt.set, b.janitor, tt.want)
		}
		b.close()
	}
}

// doctor on the data dir of a running gateway says so, and tells nobody to
// stop it: the check is meant to run beside it.
func TestDoctorBesideARunningGateway(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	c := doctorDataDir(t.Context(), dir)[0]
	want := "in use by another agentgate (pid " + strconv.Itoa(os.Getpid()) + ")"
	if c.Status != CheckOK || !strings.Contains(c.Detail, want) || strings.Contains(c.Detail, "stop it") {
		t.Errorf("data dir held by a gateway: %+v, want ok, %q, nothing to stop", c, want)
	}
}
