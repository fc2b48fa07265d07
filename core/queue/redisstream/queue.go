// Package redisstream is a core.Queue on Redis Streams, for gateways that run
// as several replicas. It satisfies the same contract as the embedded SQLite
// queue (the queuetest conformance suite).
//
// # Layout
//
// A queue is a handful of keys that share one hash tag (see keys): a stream
// with a consumer group, a hash of job records, a sorted set of delayed jobs,
// a sorted set of leases, a hash of coalescing keys and a dead-letter
// stream. Every operation is one Lua script, so each is atomic. It needs
// Redis 6.2 or later (XPENDING with an exclusive start).
//
//   - Enqueue writes the job record and, when the job is due, XADDs an entry
//     (field job=<id>) to the stream; a job due later waits in the delayed
//     set. A job with a Key that finds a waiting job with the same Key is
//     absorbed into it, moving it earlier if the new one is due sooner.
//   - Dequeue delivers with XREADGROUP, so a delivery is an entry in the
//     group's pending entries list (PEL), owned by the consumer. The lease
//     token is "<entry id>/<attempt>": it names the PEL entry and the
//     delivery of it. Its expiry is kept in the leases set.
//   - A lease that ran out is redelivered by XCLAIMing its PEL entry to the
//     next consumer that asks (Attempt+1, a new token); the old holder's Ack,
//     Extend or Fail then reports core.ErrLeaseLost.
//   - Extend moves the lease expiry and XCLAIMs the entry (JUSTID) to its
//     own consumer, which resets its idle time without counting a delivery.
//   - Ack XACKs and XDELs the entry and deletes the record. Fail does the
//     same with the entry and puts the job in the delayed set for its retry
//     (the retry is a new entry), or dead-letters it after its last attempt.
//   - Delayed jobs become stream entries when they are due: a promoter step
//     inside Enqueue and Dequeue moves them in due order, so no background
//     goroutine is needed.
//   - Recover voids the leases of the consumer's PEL entries and makes them
//     expire now; the next Dequeue claims them.
//
// # Clock
//
// Due times and lease expiries are decided by Options.Clock, never by Redis'
// own clock: they are the scores of the delayed and leases sets, in unix
// milliseconds, compared with the clock's now that every script receives.
// This is why an expired lease is found through the leases set and then
// XCLAIMed, rather than chosen by XAUTOCLAIM's idle time (which runs on
// Redis' wall clock and knows nothing of per-delivery lease lengths or
// Extend). Times are kept to the millisecond: now (and so CreatedAt) is
// rounded down, a future RunAt or lease expiry up, so nothing becomes due
// early. Redis' own clock only stamps entry ids.
//
// # Trimming
//
// A stream entry is deleted (XDEL) in the same script that XACKs it, so the
// stream holds exactly the jobs that are due or delivered, and an
// unacknowledged entry is never removed. XTRIM MINID was not chosen because
// the oldest pending entry bounds it: one long-leased job would keep every
// later, acknowledged entry in memory.
//
// # Waiting
//
// One goroutine per Queue, the listener (started by the first Dequeue that
// finds nothing due), waits while any Dequeue waits: with XREAD BLOCK for
// entries after the newest one a look found delivered, so an Enqueue on any
// replica is heard at once. It wakes one waiting Dequeue, which wakes the
// next when it takes a job while newer entries wait: a batch of jobs
// reaches as many workers, while a single job costs one look, not one per
// waiting worker. Its XREAD is bounded by Options.PollInterval; each time it
// ends with nothing new, one waiting Dequeue looks, so that delayed jobs and
// expired leases (which no Enqueue announces) are noticed. While no Dequeue
// waits (every worker busy) it sends nothing.
package redisstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentgate/agentgate/core"
)

// Options configure a Queue. The zero value is usable.
type Options struct {
	// Prefix names the queue: its keys are "agentgate:{<Prefix>}:…" (the
	// braces are a cluster hash tag). It must not contain '{' or '}'.
	// Default "default".
	Prefix string
	// Group is the stream's consumer group. Default "agentgate".
	Group string
	// Clock tells the time for due times, leases and retries. Default: the
	// system clock.
	Clock core.Clock
	// MaxAttempts is the default delivery limit before a job is
	// dead-lettered. Default 5.
	MaxAttempts int
	// Backoff is the delay before retry number attempt (1-based) of a failed
	// job. Default DefaultBackoff.
	Backoff func(attempt int) time.Duration
	// PollInterval is how often one waiting Dequeue looks for delayed jobs
	// that became due and leases that ran out (new entries wake one at
	// once). Default 250ms; at least 1ms.
	PollInterval time.Duration
}

// validate fills in defaults and rejects bad settings.
func (o *Options) validate() error {
	if o.Prefix == "" {
		o.Prefix = "default"
	}
	if err := validPrefix(o.Prefix); err != nil {
		return err
	}
	if o.Group == "" {
		o.Group = "agentgate"
	}
	if o.Clock == nil {
		o.Clock = core.SystemClock{}
	}
	if o.MaxAttempts < 0 {
		return fmt.Errorf("redisstream: max attempts must not be negative, got %d", o.MaxAttempts)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 5
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff
	}
	if o.PollInterval < 0 {
		return fmt.Errorf("redisstream: poll interval must not be negative, got %s", o.PollInterval)
	}
	if o.PollInterval == 0 {
		o.PollInterval = 250 * time.Millisecond
	}
	o.PollInterval = max(o.PollInterval, time.Millisecond) // XREAD BLOCK 0 would wait forever
	return nil
}

// DefaultBackoff is core.DefaultBackoff, kept for callers of this package.
var DefaultBackoff = core.DefaultBackoff

// promoteBatch is how many due delayed jobs one script moves into the stream
// at most; the rest follow on the next Enqueue or Dequeue.
const promoteBatch = 100

// Queue is a core.Queue on Redis Streams. It is safe for concurrent use;
// several Queues (in several processes) may share one prefix.
type Queue struct {
	client redis.UniversalClient
	opts   Options
	keys   keys

	one       chan struct{} // buffered 1: wakes one waiting Dequeue (a job may be due)
	listen    sync.Once     // starts the listener
	listening atomic.Bool   // the listener's XREAD works; else waiting Dequeue calls poll
	waiting   atomic.Int32  // Dequeue calls that found nothing and wait
	// streamNews: a wake-up was for the stream (wakeForStream) and no look
	// has started since.
	streamNews atomic.Bool
	waiter     chan struct{} // buffered 1: a Dequeue started waiting (wakes an idle listener)
	mu         sync.Mutex
	notify     core.Broadcast // wakes waiting Dequeue calls when the listener fails: they poll from then on
	last       string         // the newest entry id no look left undelivered (lookedPast)
	hmu        sync.Mutex
	hand       handoff // jobs handed to this process's waiting workers (handoff.go)
}

var _ core.Queue = (*Queue)(nil)

// New returns the queue named opts.Prefix on client, creating its stream and
// consumer group if they are missing (bounded by the client's timeouts). The
// client stays the caller's to close.
func New(client redis.UniversalClient, opts Options) (*Queue, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	q := &Queue{client: client, opts: opts, keys: newKeys(opts.Prefix), one: make(chan struct{}, 1),
		waiter: make(chan struct{}, 1), last: "0-0"}
	// Start at 0, not $: entries already in the stream are jobs.
	if err := q.createGroup(context.Background()); err != nil {
		return nil, err
	}
	return q, nil
}

// record is a job as the jobs hash and the dead-letter stream keep it. The
// Lua scripts read and write it with cjson, so every field they compare is
// always present (no omitempty) and times are unix milliseconds.
type record struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	Key         string `json:"key"`
	Payload     string `json:"payload"`
	MaxAttempts int    `json:"max"` // 0 = the queue default
	CreatedAt   int64  `json:"created"`
	RunAt       int64  `json:"run_at"`
	Attempt     int    `json:"attempt"`
	LastError   string `json:"error"`
	// Lease is the current delivery's token ("<entry>/<attempt>"), empty
	// while the job waits; Entry and Consumer are that delivery's PEL entry
	// and owner.
	Lease    string `json:"lease"`
	Entry    string `json:"entry"`
	Consumer string `json:"consumer"`
	// Due is the job's member in the delayed set while it is delayed.
	Due    string `json:"due"`
	DeadAt int64  `json:"dead_at,omitempty"`
}

// job converts r to the core.Job a caller sees.
func (q *Queue) job(r record) core.Job {
	maxAttempts := r.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = q.opts.MaxAttempts
	}
	return core.Job{
		ID:          r.ID,
		Kind:        r.Kind,
		Key:         r.Key,
		Payload:     json.RawMessage(r.Payload),
		Attempt:     r.Attempt,
		MaxAttempts: maxAttempts,
		RunAt:       time.UnixMilli(r.RunAt).UTC(),
		LastError:   r.LastError,
		CreatedAt:   time.UnixMilli(r.CreatedAt).UTC(),
		Lease:       r.Lease,
	}
}

// decode parses a record the scripts returned or stored.
func (q *Queue) decode(s string) (core.Job, error) {
	var r record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return core.Job{}, fmt.Errorf("decode job record: %w", err)
	}
	return q.job(r), nil
}

// floorMS is t in unix milliseconds, rounded down (for "now").
func floorMS(t time.Time) int64 { return t.UnixMilli() }

// ceilMS is t in unix milliseconds, rounded up (for due times and expiries,
// so nothing happens early).
func ceilMS(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}

// run runs script with the common arguments (group, now, default
// MaxAttempts) followed by args.
func (q *Queue) run(ctx context.Context, script *redis.Script, now time.Time, args ...any) *redis.Cmd {
	all := append([]any{q.opts.Group, floorMS(now), q.opts.MaxAttempts}, args...)
	cmd := script.Run(ctx, q.client, q.keys.script(), all...)
	if err := cmd.Err(); err != nil && strings.Contains(err.Error(), "NOGROUP") {
		// Redis lost its data (FLUSHALL, a restart without persistence): the
		// stream and group are gone. Make them again; the store's janitor
		// re-enqueues the jobs that were lost with them.
		if gerr := q.createGroup(ctx); gerr != nil {
			return cmd
		}
		cmd = script.Run(ctx, q.client, q.keys.script(), all...)
	}
	return cmd
}

// createGroup creates the stream and its consumer group if missing.
func (q *Queue) createGroup(ctx context.Context) error {
	err := q.client.XGroupCreateMkStream(ctx, q.keys.stream, q.opts.Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("redisstream: create group %s on %s: %w", q.opts.Group, q.keys.stream, err)
	}
	return nil
}

// Enqueue adds a job; see core.Queue. A non-empty j.ID is kept (it must not
// name a job that is still queued); otherwise one is generated.
func (q *Queue) Enqueue(ctx context.Context, j core.Job) error {
	j.Attempt, j.LastError = 0, ""
	return q.enqueue(ctx, j)
}

// enqueue adds j, which has had j.Attempt deliveries, the last ending with
// j.LastError.
func (q *Queue) enqueue(ctx context.Context, j core.Job) error {
	now := q.opts.Clock.Now()
	runAt := j.RunAt
	if runAt.IsZero() {
		runAt = now
	}
	if j.ID == "" {
		j.ID = core.NewID("job")
	}
	payload := string(j.Payload)
	if payload == "" {
		payload = "null"
	}
	// A job due now is due at this millisecond; a later one at the next
	// whole millisecond, so it is never delivered early.
	due := floorMS(runAt)
	if runAt.After(now) {
		due = ceilMS(runAt)
	}
	b, err := json.Marshal(record{
		ID:          j.ID,
		Kind:        j.Kind,
		Key:         j.Key,
		Payload:     payload,
		MaxAttempts: max(j.MaxAttempts, 0),
		CreatedAt:   floorMS(now),
		RunAt:       due,
		Attempt:     j.Attempt,
		LastError:   j.LastError,
	})
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", j.Kind, err)
	}
	n, err := q.run(ctx, enqueueScript, now, j.ID, string(b), j.Key, due, promoteBatch).Int()
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", j.Kind, err)
	}
	if n < 0 {
		return fmt.Errorf("enqueue %s: job %s: %w", j.Kind, j.ID, core.ErrJobExists)
	}
	return nil
}

// Dequeue blocks until a job is due and leases it to consumer; see
// core.Queue. A job added to the stream by any Queue on this prefix wakes a
// waiting Dequeue at once; delayed jobs and expired leases are noticed
// within Options.PollInterval.
func (q *Queue) Dequeue(ctx context.Context, consumer string, lease time.Duration) (core.Job, error) {
	waiting := false
	idle := false // counted in hand.idle: waits, not looking (Reserve)
	defer func() {
		if waiting {
			q.waiting.Add(-1)
		}
		q.setIdle(&idle, false) // a job handed meanwhile waits for the next Dequeue, or Recover
	}()
	j, err := core.WaitDequeue(ctx, q.opts.PollInterval*idleLooks, q.notify.C, q.one, func() (core.Job, bool, time.Duration, error) {
		if j, ok := q.handedOff(&idle); ok {
			return j, true, 0, nil
		}
		q.streamNews.Store(false) // this look sees what the stream holds
		f, err := q.dequeue(ctx, consumer, lease)
		if err != nil || f.more {
			q.wakeForStream() // there may be more: the next waiting worker looks
		}
		if err != nil || f.ok {
			return f.job, f.ok, 0, err
		}
		// Nothing up to f.last was left undelivered when the script looked,
		// so the listener, reading after it, hears every job added since.
		q.lookedPast(f.last)
		q.setIdle(&idle, true)
		if !waiting {
			waiting = true
			q.waiting.Add(1)
			q.listen.Do(func() { go q.listener() })
			select {
			case q.waiter <- struct{}{}:
			default:
			}
		}
		if !q.listening.Load() {
			return core.Job{}, false, q.opts.PollInterval, nil
		}
		return core.Job{}, false, 0, nil
	})
	if err != nil && ctx.Err() != nil {
		q.passOn() // a wake-up this call took as it ended goes to another
	}
	return j, err
}

// idleLooks is how many poll intervals a waiting Dequeue sleeps while the
// listener works: the listener wakes one of them every poll interval, so
// this is only a safety net.
const idleLooks = 20

// listener, while a Dequeue waits, wakes one waiting Dequeue for each
// batch of entries added to the stream after the newest one looked past,
// and one each time its XREAD has waited a poll interval for nothing (a
// delayed job may have become due, a lease run out). While none waits it
// sends nothing. It ends when the client is closed.
func (q *Queue) listener() {
	q.listening.Store(true)
	for {
		if q.waiting.Load() == 0 {
			<-q.waiter
			continue
		}
		res, err := q.client.XRead(context.Background(), &redis.XReadArgs{
			Streams: []string{q.keys.stream, q.past()},
			Count:   listenBatch,
			Block:   q.opts.PollInterval,
		}).Result()
		switch {
		case err == nil || errors.Is(err, redis.Nil):
			for _, st := range res {
				if n := len(st.Messages); n > 0 {
					q.lookedPast(st.Messages[n-1].ID)
				}
			}
			q.listening.Store(true)
			q.wakeForStream()
		case errors.Is(err, redis.ErrClosed):
			q.lost()
			return
		default:
			// Redis unreachable: waiting Dequeue calls poll (and report
			// the error) until the XREAD works again.
			if q.listening.Load() {
				q.lost()
			}
			time.Sleep(min(q.opts.PollInterval, time.Second))
		}
	}
}

// listenBatch is how many new entries one XREAD of the listener reads at
// most; it only needs to learn the last one.
const listenBatch = 100

// lookedPast records that no entry up to id was left undelivered when a
// look or the listener saw it: the listener reads after the newest such id.
func (q *Queue) lookedPast(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if entryAfter(id, q.last) {
		q.last = id
	}
}

// past is the newest id lookedPast recorded ("0-0" before any).
func (q *Queue) past() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.last
}

// entryAfter reports whether stream entry id a ("<ms>-<seq>") comes after b.
func entryAfter(a, b string) bool {
	ams, aseq, _ := strings.Cut(a, "-")
	bms, bseq, _ := strings.Cut(b, "-")
	am, err1 := strconv.ParseUint(ams, 10, 64)
	as, err2 := strconv.ParseUint(aseq, 10, 64)
	bm, _ := strconv.ParseUint(bms, 10, 64)
	bs, _ := strconv.ParseUint(bseq, 10, 64)
	return err1 == nil && err2 == nil && (am > bm || am == bm && as > bs)
}

// lost tells the waiting Dequeue calls that the listener stopped hearing
// new jobs: they poll every poll interval.
func (q *Queue) lost() {
	q.listening.Store(false)
	q.notify.Wake()
}

// wakeForStream wakes one waiting Dequeue call to look in the stream. A
// Dequeue that takes a handed job with that wake-up passes it on.
func (q *Queue) wakeForStream() {
	q.streamNews.Store(true)
	q.passOn()
}

// passOn wakes one waiting Dequeue call, if none is woken already.
func (q *Queue) passOn() {
	select {
	case q.one <- struct{}{}:
	default:
	}
}

// TryDequeue leases the next due job to consumer, or reports ok=false when
// none is due; see core.Queue. Jobs whose lease ran out come first, then
// due jobs in the order they became due. Jobs that have used up their
// deliveries are dead-lettered on the way ("delivery limit reached").
func (q *Queue) TryDequeue(ctx context.Context, consumer string, lease time.Duration) (core.Job, bool, error) {
	f, err := q.dequeue(ctx, consumer, lease)
	return f.job, f.ok, err
}

// found is what one run of dequeueScript found.
type found struct {
	job  core.Job
	ok   bool   // job was leased
	more bool   // ok, and another job may be due (newer entries, an expired lease)
	last string // !ok: the id of the stream's last entry ("0-0" when empty)
}

// dequeue runs dequeueScript for TryDequeue and Dequeue.
func (q *Queue) dequeue(ctx context.Context, consumer string, lease time.Duration) (found, error) {
	if consumer == "" {
		return found{}, errors.New("dequeue: consumer must not be empty")
	}
	if lease <= 0 {
		return found{}, fmt.Errorf("dequeue: lease must be positive, got %s", lease)
	}
	now := q.opts.Clock.Now()
	res, err := q.run(ctx, dequeueScript, now, consumer, ceilMS(now.Add(lease)), promoteBatch).Slice()
	if err != nil {
		return found{}, fmt.Errorf("dequeue: %w", err)
	}
	if len(res) == 2 && res[0] == int64(0) {
		last, _ := res[1].(string)
		return found{last: last}, nil
	}
	if len(res) != 3 || res[0] != int64(1) {
		return found{}, fmt.Errorf("dequeue: unexpected script reply %v", res)
	}
	value, _ := res[1].(string)
	j, err := q.decode(value)
	if err != nil {
		return found{}, fmt.Errorf("dequeue: %w", err)
	}
	return found{job: j, ok: true, more: res[2] == int64(1)}, nil
}

// leaseAttempt is the attempt a lease token ("<entry>/<attempt>") names.
func leaseAttempt(lease string) (int, bool) {
	i := strings.LastIndexByte(lease, '/')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(lease[i+1:])
	return n, err == nil && n > 0
}

// Extend renews the lease of a delivered job; see core.Queue. The lease
// token does not change.
func (q *Queue) Extend(ctx context.Context, j core.Job, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("extend job %s: lease must be positive, got %s", j.ID, lease)
	}
	switch j.Lease {
	case "":
		return fmt.Errorf("extend job %s: %w", j.ID, core.ErrLeaseLost)
	case localLease:
		return nil // handed over in memory: no lease to renew
	}
	now := q.opts.Clock.Now()
	n, err := q.run(ctx, extendScript, now, j.ID, j.Lease, ceilMS(now.Add(lease))).Int()
	if err != nil {
		return fmt.Errorf("extend job %s: %w", j.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("extend job %s: %w", j.ID, core.ErrLeaseLost)
	}
	return nil
}

// Ack removes a delivered job; see core.Queue. Its stream entry is
// acknowledged and deleted.
func (q *Queue) Ack(ctx context.Context, j core.Job) error {
	switch j.Lease {
	case "":
		return fmt.Errorf("ack job %s: %w", j.ID, core.ErrLeaseLost)
	case localLease:
		q.doneLocal(j.ID) // handed over in memory: nothing in Redis
		return nil
	}
	n, err := q.run(ctx, ackScript, q.opts.Clock.Now(), j.ID, j.Lease).Int()
	if err != nil {
		return fmt.Errorf("ack job %s: %w", j.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("ack job %s: %w", j.ID, core.ErrLeaseLost)
	}
	return nil
}

// Fail records reason and schedules a retry after retryAfter (<= 0: after
// Options.Backoff(attempt)), or dead-letters the job when it has used its
// last attempt; see core.Queue.
func (q *Queue) Fail(ctx context.Context, j core.Job, reason string, retryAfter time.Duration) (bool, error) {
	if j.Lease == localLease {
		return q.failLocal(ctx, j, reason, retryAfter)
	}
	attempt, ok := leaseAttempt(j.Lease)
	if !ok {
		return false, fmt.Errorf("fail job %s: %w", j.ID, core.ErrLeaseLost)
	}
	delay := retryAfter
	if delay <= 0 {
		delay = q.opts.Backoff(attempt)
	}
	now := q.opts.Clock.Now()
	n, err := q.run(ctx, failScript, now, j.ID, j.Lease, reason, ceilMS(now.Add(delay))).Int()
	if err != nil {
		return false, fmt.Errorf("fail job %s: %w", j.ID, err)
	}
	if n < 0 {
		return false, fmt.Errorf("fail job %s: %w", j.ID, core.ErrLeaseLost)
	}
	return n == 1, nil
}

// Recover makes the jobs leased to consumer due at once and returns how
// many there were; see core.Queue. Their Attempt still counts the lost
// delivery. The jobs handed to this process (Handoff) that no step acked or
// failed go into the stream, due now, as new jobs.
func (q *Queue) Recover(ctx context.Context, consumer string) (int, error) {
	if consumer == "" {
		return 0, errors.New("recover: consumer must not be empty")
	}
	local, lerr := q.recoverLocal(ctx) // its failure does not hold back the leased jobs
	n, err := q.run(ctx, recoverScript, q.opts.Clock.Now(), consumer).Int()
	n += local
	if err = errors.Join(err, lerr); err != nil {
		return 0, fmt.Errorf("recover %s: %w", consumer, err)
	}
	if n > 0 {
		q.wakeForStream() // their leases ran out now: a waiting worker takes them
	}
	return n, nil
}

// DeadLetters lists up to limit (0 = all) dead-lettered jobs in the order
// they died, oldest first; see core.Queue.
func (q *Queue) DeadLetters(ctx context.Context, limit int) ([]core.Job, error) {
	var (
		msgs []redis.XMessage
		err  error
	)
	if limit > 0 {
		msgs, err = q.client.XRangeN(ctx, q.keys.dead, "-", "+", int64(limit)).Result()
	} else {
		msgs, err = q.client.XRange(ctx, q.keys.dead, "-", "+").Result()
	}
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	jobs := make([]core.Job, 0, len(msgs))
	for _, m := range msgs {
		s, _ := m.Values["job"].(string)
		j, err := q.decode(s)
		if err != nil {
			return nil, fmt.Errorf("dead letters: entry %s: %w", m.ID, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// RetryDead enqueues the dead-lettered job id again, due now with its
// attempts counted anew, then removes it from the dead letters; see
// core.Queue. A crash between the two leaves it in both: a second retry
// enqueues it again (jobs are idempotent).
func (q *Queue) RetryDead(ctx context.Context, id string) (core.Job, error) {
	msgs, err := q.client.XRange(ctx, q.keys.dead, "-", "+").Result()
	if err != nil {
		return core.Job{}, fmt.Errorf("retry dead job %s: %w", id, err)
	}
	for _, m := range msgs {
		s, _ := m.Values["job"].(string)
		j, err := q.decode(s)
		if err != nil || j.ID != id {
			continue
		}
		again := j.Again(time.Time{})
		if err := q.Enqueue(ctx, again); err != nil {
			return core.Job{}, fmt.Errorf("retry dead job %s: %w", id, err)
		}
		if err := q.client.XDel(ctx, q.keys.dead, m.ID).Err(); err != nil {
			return core.Job{}, fmt.Errorf("retry dead job %s: %w", id, err)
		}
		again.RunAt, again.CreatedAt, again.LastError = q.opts.Clock.Now(), j.CreatedAt, j.LastError
		return again, nil
	}
	return core.Job{}, fmt.Errorf("retry dead job %s: %w", id, core.ErrNotFound)
}

// OldestDue implements core.QueueAger (oldestScript).
func (q *Queue) OldestDue(ctx context.Context) (time.Time, error) {
	ms, err := q.run(ctx, oldestScript, q.opts.Clock.Now()).Int64()
	if err != nil {
		return time.Time{}, fmt.Errorf("queue oldest due: %w", err)
	}
	if ms < 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(ms).UTC(), nil
}

// Depth counts jobs not yet acked and not dead (delayed, due and leased);
// see core.Queue.
func (q *Queue) Depth(ctx context.Context) (int64, error) {
	n, err := q.client.HLen(ctx, q.keys.jobs).Result()
	if err != nil {
		return 0, fmt.Errorf("queue depth: %w", err)
	}
	return n, nil
}
