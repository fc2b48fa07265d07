package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// checkpointInterval is the least time between two background checkpoints.
const checkpointInterval = 50 * time.Millisecond

// checkpointer copies committed WAL frames into the database file in the
// background, on a connection of its own (PRAGMA wal_checkpoint(PASSIVE):
// it neither waits for nor blocks the writer and the readers). Without it
// the commit that fills the WAL to SQLite's auto-checkpoint size copies the
// whole WAL itself, and every request waiting for that commit waits for the
// copy; with it that commit finds the frames copied already.
type checkpointer struct {
	conn   *sql.DB
	kick   chan struct{} // a commit added frames
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startCheckpointer(dsn string) (*checkpointer, error) {
	conn, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	conn.SetMaxOpenConns(1)
	conn.SetConnMaxIdleTime(0)
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{conn: conn, kick: make(chan struct{}, 1), cancel: cancel}
	c.wg.Go(func() { c.run(ctx) })
	return c, nil
}

// committed tells the checkpointer that a commit added WAL frames. It never
// blocks.
func (c *checkpointer) committed() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run(ctx context.Context) {
	t := time.NewTimer(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		}
		// An error (the database is busy or closing) is left to the next
		// round, or to SQLite's own checkpoint in the writer.
		_, _ = c.conn.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
		t.Reset(checkpointInterval)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// stop ends the checkpointer and closes its connection.
func (c *checkpointer) stop() error {
	c.cancel()
	c.wg.Wait()
	return c.conn.Close()
}
