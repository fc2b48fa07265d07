package bench

// agentgate bench slack-ingest: starts a real `agentgate serve` with Slack
// configured against an in-process fake Slack Web API and drives signed
// Events API requests at /slack/events from a built-in load generator.

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/interfaces/slack/slacktest"
)

const benchSlackHelp = `Usage: agentgate bench slack-ingest [flags]

Starts one agentgate server (this binary, or --server-bin) with Slack
configured against a built-in fake Slack Web API and the offline demo model,
then --clients clients send signed Events API app_mention events (Slack's
payload, each with its own event_id and ts) to POST /slack/events for
--duration, after a --warmup that is not counted, and prints:
  - acknowledged events per second and the acknowledgement latency
    (request written to response read) p50/p99/max;
  - the server's CPU time per acknowledged event (/proc/PID/stat), and the
    bench process's (load generator and fake Slack);
  - whether every acknowledged event is in the server's durable inbox, read
    from its store after the server stopped;
  - how many of them the server turned into runs meanwhile, and its RSS.
Each client keeps one HTTP/1.1 connection and sends its next event when the
previous one is answered. Progress goes to stderr, the report to stdout.

Flags:
  --duration D        measured time (default 10s)
  --warmup D          time before it, not counted (default 2s)
  --clients N         concurrent clients (default 32)
  --quick             smoke run: --duration 2s --warmup 500ms (flags given
                      explicitly still win)
  --markdown          also print a Markdown section for docs/benchmarks.md
  --database-url URL  AGENTGATE_DATABASE_URL for the server (PostgreSQL; a
                      scratch database: the events stay in its inbox)
  --server-bin PATH   the agentgate binary to run (default: this one)
  --target HOST:PORT  drive a server that is already running there instead
                      (another Slack app, e.g. one built on Bolt, for a
                      comparison): it must check signatures with the signing
                      secret ` + "`" + ingestSecret + "`" + `; nothing is checked for
                      storage
  --target-pid PID    that server's process, for its CPU per event

The server inherits AGENTGATE_SQLITE_SYNC; every other AGENTGATE_ and SLACK_
variable is removed from its environment.
`

// ingestOptions are slack-ingest's flags, resolved.
type ingestOptions struct {
	duration, warmup time.Duration
	clients          int
	quick, markdown  bool
	databaseURL      string
	serverBin        string
	target           string
	targetPID        int
	command          string
}

func parseIngestOptions(args []string, stderr io.Writer) (ingestOptions, error) {
	var o ingestOptions
	fs := flag.NewFlagSet("bench slack-ingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchSlackHelp) }
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "warm-up time")
	fs.IntVar(&o.clients, "clients", 32, "concurrent clients")
	fs.BoolVar(&o.quick, "quick", false, "smoke run")
	fs.BoolVar(&o.markdown, "markdown", false, "print Markdown")
	fs.StringVar(&o.databaseURL, "database-url", "", "PostgreSQL URL")
	fs.StringVar(&o.serverBin, "server-bin", "", "agentgate binary")
	fs.StringVar(&o.target, "target", "", "a running server to drive")
	fs.IntVar(&o.targetPID, "target-pid", 0, "its process id")
	set, err := benchParseFlags(fs, args)
	if err != nil {
		return o, err
	}
	if o.quick {
		if !set["duration"] {
			o.duration = 2 * time.Second
		}
		if !set["warmup"] {
			o.warmup = 500 * time.Millisecond
		}
	}
	switch {
	case o.duration <= 0:
		return o, &UsageError{fmt.Sprintf("--duration: must be positive, got %s", o.duration)}
	case o.warmup < 0:
		return o, &UsageError{fmt.Sprintf("--warmup: must not be negative, got %s", o.warmup)}
	case o.clients < 1:
		return o, &UsageError{fmt.Sprintf("--clients: must be at least 1, got %d", o.clients)}
	case o.target != "" && o.targetPID <= 0:
		return o, &UsageError{"--target needs --target-pid: the process whose CPU to measure"}
	}
	o.command = benchCommandLine(append([]string{"slack-ingest"}, args...))
	return o, nil
}

// ingestSecret signs the bench's requests; the server gets it as
// SLACK_SIGNING_SECRET.
const ingestSecret = "bench-signing-secret-0123456789abcdef"

func benchSlackIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseIngestOptions(args, stderr)
	if err != nil {
		return err // Main answers flag.ErrHelp with nil
	}
	if o.target != "" {
		return benchSlackTarget(ctx, o, stdout, stderr)
	}
	var tmp string
	if o.serverBin, tmp, err = benchSetup(o.serverBin); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	fake := slacktest.NewServer()
	defer fake.Close()
	cfg := "agents:\n  bench:\n    description: agentgate bench slack-ingest\n    model: {provider: demo}\n" +
		"interfaces:\n  slack:\n    default_agent: bench\n"
	progress := func(format string, a ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", a...) }
	bo := benchOptions{replicas: 1, databaseURL: o.databaseURL, serverBin: o.serverBin,
		env: []string{"SLACK_SIGNING_SECRET=" + ingestSecret, "SLACK_BOT_TOKEN=" + fake.Token, "SLACK_API_URL=" + fake.URL}}
	progress("starting a %s server from %s", bo.mode(), o.serverBin)
	reps, err := startBenchReplicas(ctx, bo, cfg, tmp)
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { stopBenchReplicas(reps) }) }
	defer stop()
	if err != nil {
		return err
	}
	srv := reps[0]
	rep := ingestReport{opts: o, machine: benchMachineInfo(), date: time.Now(), sync: bo.setupStore()}
	rep.idleRSS, rep.rssErr = benchProcStatus(srv.cmd.Process.Pid, "VmRSS")

	load, err := newIngestLoad(strings.TrimPrefix(srv.base, "http://"), o.clients)
	if err != nil {
		return err
	}
	progress("%d clients: %s warm-up, then %s measured", o.clients, o.warmup, o.duration)
	if err := load.run(ctx, srv.cmd.Process.Pid, o.warmup, o.duration, &rep); err != nil {
		return err
	}
	rep.peakRSS, rep.rssErr = srv.peak()

	progress("stopping the server, then reading its inbox")
	stop()
	keys, processed, err := ingestStored(ctx, o.databaseURL, srv.dataDir, load.channel)
	if err != nil {
		return err
	}
	rep.processed = processed
	for _, n := range load.acked() {
		if keys[load.key(n)] {
			rep.stored++
		} else {
			rep.missing++
		}
	}
	rep.write(stdout)
	if o.markdown {
		fmt.Fprintln(stdout)
		rep.writeMarkdown(stdout)
	}
	if rep.missing > 0 {
		return fmt.Errorf("bench: %d acknowledged events are not in the inbox", rep.missing)
	}
	return nil
}

// benchSlackTarget drives the server at o.target with the same load and
// reports what the load generator sees, and the target's CPU.
func benchSlackTarget(ctx context.Context, o ingestOptions, stdout, stderr io.Writer) error {
	rep := ingestReport{opts: o, machine: benchMachineInfo(), date: time.Now()}
	rep.idleRSS, rep.rssErr = benchProcStatus(o.targetPID, "VmRSS")
	load, err := newIngestLoad(o.target, o.clients)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench: %d clients against %s: %s warm-up, then %s measured\n", o.clients, o.target, o.warmup, o.duration)
	if err := load.run(ctx, o.targetPID, o.warmup, o.duration, &rep); err != nil {
		return err
	}
	rep.peakRSS, _ = benchProcStatus(o.targetPID, "VmHWM")
	rep.write(stdout)
	if o.markdown {
		fmt.Fprintln(stdout)
		rep.writeMarkdown(stdout)
	}
	return nil
}

// ingestLoad is the load generator: clients on their own connections,
// numbering events from one counter.
type ingestLoad struct {
	addr    string
	channel string // this bench's channel: keys are msg:{channel}:{ts}
	tag     string // makes event ids unique across benches
	next    atomic.Uint64
	clients []*ingestClient
	errors  benchErrors
}

func newIngestLoad(addr string, clients int) (*ingestLoad, error) {
	var b [5]byte
	_, _ = rand.Read(b[:])
	tag := strings.ToUpper(hex.EncodeToString(b[:]))
	l := &ingestLoad{addr: addr, channel: "CB" + tag, tag: tag}
	for range clients {
		c := &ingestClient{load: l, mac: hmac.New(sha256.New, []byte(ingestSecret))}
		if err := c.dial(); err != nil {
			return nil, err
		}
		l.clients = append(l.clients, c)
	}
	return l, nil
}

// appendTS appends event n's Slack ts, unique in the bench's channel:
// 1700000000.000000 + n µs.
func appendTS(b []byte, n uint64) []byte {
	b = strconv.AppendUint(b, 1700000000+n/1000000, 10)
	frac := strconv.AppendUint(make([]byte, 0, 8), 1000000+n%1000000, 10)
	frac[0] = '.'
	return append(b, frac...)
}

func (l *ingestLoad) key(n uint64) string { return "msg:" + l.channel + ":" + string(appendTS(nil, n)) }

// acked returns the numbers of every acknowledged event, warm-up included.
func (l *ingestLoad) acked() []uint64 {
	var out []uint64
	for _, c := range l.clients {
		out = append(out, c.acked...)
	}
	return out
}

// run sends events for warmup+measure and fills rep's load figures.
func (l *ingestLoad) run(ctx context.Context, pid int, warmup, measure time.Duration, rep *ingestReport) error {
	start := time.Now()
	from, until := start.Add(warmup), start.Add(warmup+measure)
	var wg sync.WaitGroup
	for _, c := range l.clients {
		wg.Go(func() { c.loop(ctx, from, until) })
	}
	// CPU of both processes over the measured window.
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(from)):
	}
	cpu0, err0 := benchProcCPU(pid)
	self0 := benchSelfCPU()
	host0, hostErr0 := benchHostCPU()
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(until)):
	}
	cpu1, err1 := benchProcCPU(pid)
	self1 := benchSelfCPU()
	host1, hostErr1 := benchHostCPU()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := errors.Join(err0, err1); err != nil {
		rep.cpuErr = err
	}
	var lat []time.Duration
	for _, c := range l.clients {
		lat = append(lat, c.lat...)
		rep.measuredAcked += c.measuredAcked
		rep.sent += c.sent
		c.close()
	}
	slices.Sort(lat)
	rep.elapsed = measure
	rep.p50, rep.p99 = benchPercentile(lat, 50), benchPercentile(lat, 99)
	if len(lat) > 0 {
		rep.max = lat[len(lat)-1]
	}
	rep.serverCPU, rep.benchCPU = cpu1-cpu0, self1-self0
	if hostErr0 == nil && hostErr1 == nil {
		rep.host = host1.sub(host0)
	}
	rep.errors = &l.errors
	return nil
}

// ingestClient sends one event at a time on its own connection.
type ingestClient struct {
	load *ingestLoad
	conn net.Conn
	r    *bufio.Reader
	mac  hash.Hash
	req  []byte
	body []byte
	sig  []byte
	ts   []byte

	sent, measuredAcked int
	acked               []uint64        // every acknowledged event
	lat                 []time.Duration // of the events sent in the measured window
}

func (c *ingestClient) dial() error {
	conn, err := net.Dial("tcp", c.load.addr)
	if err != nil {
		return fmt.Errorf("bench: connect to the server: %w", err)
	}
	c.conn, c.r = conn, bufio.NewReaderSize(conn, 4096)
	return nil
}

func (c *ingestClient) close() {
	if c.conn != nil {
		c.conn.Close()
	}
}

func (c *ingestClient) loop(ctx context.Context, from, until time.Time) {
	for ctx.Err() == nil {
		now := time.Now()
		if !now.Before(until) {
			return
		}
		n := c.load.next.Add(1)
		c.build(n, now)
		status, err := c.roundTrip()
		d := time.Since(now)
		c.sent++
		measured := !now.Before(from)
		if measured {
			c.lat = append(c.lat, d)
		}
		switch {
		case err != nil:
			c.load.errors.add(err)
			c.close()
			if err := c.dial(); err != nil {
				c.load.errors.add(err)
				return
			}
		case status != 200:
			c.load.errors.add(fmt.Errorf("POST /slack/events: status %d", status))
		default:
			c.acked = append(c.acked, n)
			if measured {
				c.measuredAcked++
			}
		}
	}
}

// build writes the signed request of event n sent at now into c.req: an
// app_mention event_callback as Slack sends it.
func (c *ingestClient) build(n uint64, now time.Time) {
	c.ts = appendTS(c.ts[:0], n)
	ts := c.ts
	b := c.body[:0]
	b = append(b, `{"token":"ZZZZZZWSxiZZZ2yIvs3peJ","team_id":"`+slacktest.DefaultTeamID+`","api_app_id":"A0AGENTGATE","event":{"client_msg_id":"`...)
	b = append(b, c.load.tag...)
	b = strconv.AppendUint(b, n, 10)
	b = append(b, `","type":"app_mention","text":"<@`+slacktest.DefaultUserID+`> what did the nightly report say? #`...)
	b = strconv.AppendUint(b, n, 10)
	b = append(b, `","user":"U0BENCHUSER","ts":"`...)
	b = append(b, ts...)
	b = append(b, `","team":"`+slacktest.DefaultTeamID+`","blocks":[{"type":"rich_text","block_id":"Lk0","elements":[{"type":"rich_text_section","elements":[{"type":"user","user_id":"`+slacktest.DefaultUserID+`"},{"type":"text","text":" what did the nightly report say? #`...)
	b = strconv.AppendUint(b, n, 10)
	b = append(b, `"}]}]}],"channel":"`...)
	b = append(b, c.load.channel...)
	b = append(b, `","event_ts":"`...)
	b = append(b, ts...)
	b = append(b, `"},"type":"event_callback","event_id":"Ev`...)
	b = append(b, c.load.tag...)
	b = strconv.AppendUint(b, n, 36)
	b = append(b, `","event_time":`...)
	b = strconv.AppendInt(b, now.Unix(), 10)
	b = append(b, `,"authorizations":[{"enterprise_id":null,"team_id":"`+slacktest.DefaultTeamID+`","user_id":"`+slacktest.DefaultUserID+`","is_bot":true,"is_enterprise_install":false}],"is_ext_shared_channel":false,"event_context":"4-eyJldCI6ImFwcF9tZW50aW9uIiwidGlkIjoiVDBBR0VOVEdBVEUiLCJhaWQiOiJBMEFHRU5UR0FURSIsImNpZCI6IkNCIn0"}`...)
	c.body = b

	unix := strconv.FormatInt(now.Unix(), 10)
	c.mac.Reset()
	c.mac.Write([]byte("v0:" + unix + ":"))
	c.mac.Write(b)
	c.sig = c.mac.Sum(c.sig[:0])

	r := c.req[:0]
	r = append(r, "POST /slack/events HTTP/1.1\r\nHost: "...)
	r = append(r, c.load.addr...)
	r = append(r, "\r\nUser-Agent: Slackbot 1.0 (+https://api.slack.com/robots)\r\nAccept: */*\r\nAccept-Encoding: gzip,deflate\r\nContent-Type: application/json\r\nContent-Length: "...)
	r = strconv.AppendInt(r, int64(len(b)), 10)
	r = append(r, "\r\nX-Slack-Request-Timestamp: "...)
	r = append(r, unix...)
	r = append(r, "\r\nX-Slack-Signature: v0="...)
	r = hex.AppendEncode(r, c.sig)
	r = append(r, "\r\n\r\n"...)
	r = append(r, b...)
	c.req = r
}

// roundTrip writes c.req and reads the response's status, skipping its body.
func (c *ingestClient) roundTrip() (int, error) {
	if _, err := c.conn.Write(c.req); err != nil {
		return 0, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !strings.HasPrefix(string(line[:5]), "HTTP/") {
		return 0, fmt.Errorf("malformed status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("malformed status line %q", line)
	}
	length, chunked := -1, false
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) <= 2 {
			break
		}
		k, v, ok := strings.Cut(string(line), ":")
		switch {
		case !ok:
		case strings.EqualFold(k, "Content-Length"):
			if length, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
				return 0, fmt.Errorf("malformed Content-Length %q", v)
			}
		case strings.EqualFold(k, "Transfer-Encoding") && strings.EqualFold(strings.TrimSpace(v), "chunked"):
			chunked = true // Node's servers (Bolt) answer so
		}
	}
	if chunked {
		return status, c.skipChunks()
	}
	if length < 0 {
		return 0, errors.New("response without Content-Length")
	}
	if _, err := c.r.Discard(length); err != nil {
		return 0, err
	}
	return status, nil
}

// skipChunks reads a chunked body to its end.
func (c *ingestClient) skipChunks() error {
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, _, _ := strings.Cut(strings.TrimSpace(string(line)), ";")
		n, err := strconv.ParseInt(size, 16, 64)
		if err != nil {
			return fmt.Errorf("malformed chunk size %q", line)
		}
		if n == 0 { // the last chunk; then an empty trailer
			for {
				line, err := c.r.ReadSlice('\n')
				if err != nil || len(line) <= 2 {
					return err
				}
			}
		}
		if _, err := c.r.Discard(int(n) + 2); err != nil { // the data and its CRLF
			return err
		}
	}
}

// benchProcCPU is the user+system CPU time process pid has used, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func benchProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU time of pid %d (needs Linux /proc): %w", pid, err)
	}
	// The command name (field 2) may hold spaces; fields after it are plain.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(utime+stime) * tick, nil
}

// hostCPU is the machine's CPU time by kind, from the first line of
// /proc/stat, in clock ticks.
type hostCPU struct{ total, idle, steal int64 }

func (a hostCPU) sub(b hostCPU) hostCPU {
	return hostCPU{a.total - b.total, a.idle - b.idle, a.steal - b.steal}
}

func benchHostCPU() (hostCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostCPU{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return hostCPU{}, errors.New("/proc/stat: unexpected format")
	}
	var h hostCPU
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return hostCPU{}, errors.New("/proc/stat: unexpected format")
		}
		switch i {
		case 3, 4: // idle, iowait
			h.idle += n
		case 7:
			h.steal += n
		}
		if i < 8 { // guest time is counted in user time already
			h.total += n
		}
	}
	return h, nil
}

// benchSelfCPU is the CPU time this process has used.
func benchSelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ingestStored reads the server's inbox after it stopped: the keys of the
// bench's channel, and how many of them were processed.
func ingestStored(ctx context.Context, databaseURL, dataDir, channel string) (map[string]bool, int, error) {
	prefix := "msg:" + channel + ":%"
	var (
		rows interface {
			Next() bool
			Scan(...any) error
			Err() error
			Close()
		}
		closeDB func()
	)
	if databaseURL != "" {
		conn, err := pgx.Connect(ctx, databaseURL)
		if err != nil {
			return nil, 0, fmt.Errorf("bench: read the inbox: %w", err)
		}
		closeDB = func() { conn.Close(context.Background()) }
		r, err := conn.Query(ctx, `SELECT dedupe_key, processed_at IS NOT NULL FROM inbox WHERE platform = 'slack' AND dedupe_key LIKE $1`, prefix)
		if err != nil {
			closeDB()
			return nil, 0, fmt.Errorf("bench: read the inbox: %w", err)
		}
		rows = r
	} else {
		db, err := sql.Open("sqlite", filepath.Join(dataDir, "agentgate.db")+"?_pragma=query_only(1)")
		if err != nil {
			return nil, 0, fmt.Errorf("bench: read the inbox: %w", err)
		}
		closeDB = func() { db.Close() }
		r, err := db.QueryContext(ctx, `SELECT dedupe_key, processed_at IS NOT NULL FROM inbox WHERE platform = 'slack' AND dedupe_key LIKE ?`, prefix)
		if err != nil {
			closeDB()
			return nil, 0, fmt.Errorf("bench: read the inbox: %w", err)
		}
		rows = sqlRows{r}
	}
	defer closeDB()
	defer rows.Close()
	keys := map[string]bool{}
	processed := 0
	for rows.Next() {
		var key string
		var done bool
		if err := rows.Scan(&key, &done); err != nil {
			return nil, 0, fmt.Errorf("bench: read the inbox: %w", err)
		}
		keys[key] = true
		if done {
			processed++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("bench: read the inbox: %w", err)
	}
	return keys, processed, nil
}

// sqlRows gives *sql.Rows pgx.Rows' Close without a result.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// ingestReport is what slack-ingest prints.
type ingestReport struct {
	opts    ingestOptions
	machine benchMachine
	date    time.Time
	sync    string

	sent, measuredAcked int
	elapsed             time.Duration
	p50, p99, max       time.Duration
	errors              *benchErrors

	serverCPU, benchCPU time.Duration
	cpuErr              error
	host                hostCPU // the machine over the window; zero when unknown

	stored, missing, processed int

	idleRSS, peakRSS int64
	rssErr           error
}

func (r *ingestReport) perSecond() float64 { return float64(r.measuredAcked) / r.elapsed.Seconds() }

// perEvent is d divided over the measured acknowledged events, in µs.
func (r *ingestReport) perEvent(d time.Duration) string {
	if r.cpuErr != nil || r.measuredAcked == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)/float64(r.measuredAcked))
}

// hostLoad says how busy the machine was over the window: CPU time used by
// processes other than the server and the bench, and stolen by the
// hypervisor, in cores.
func (r *ingestReport) hostLoad() string {
	if r.host.total <= 0 || r.cpuErr != nil {
		return "n/a"
	}
	const tick = 10 * time.Millisecond
	cores := float64(r.host.total) * float64(tick) / float64(r.elapsed)
	busy := time.Duration(r.host.total-r.host.idle-r.host.steal) * tick
	others := max(busy-r.serverCPU-r.benchCPU, 0)
	return fmt.Sprintf("other processes %.2f cores, hypervisor steal %.2f cores (of %.0f)",
		others.Seconds()/r.elapsed.Seconds(), float64(r.host.steal)*float64(tick)/float64(r.elapsed), cores)
}

func (r *ingestReport) setup() string {
	if !r.started() {
		return fmt.Sprintf("External server at %s (pid %d), not started by the bench; %d clients on one keep-alive connection each; load generator in the bench process",
			r.opts.target, r.opts.targetPID, r.opts.clients)
	}
	return fmt.Sprintf("%s, 1 server; %d clients on one keep-alive connection each; load generator and fake Slack Web API in the bench process; demo model",
		r.sync, r.opts.clients)
}

// started reports whether the bench started the server it measured (it
// did not with --target): only then is there a fake Slack to count and an
// inbox to read.
func (r *ingestReport) started() bool { return r.opts.target == "" }

// benchDoes says what the bench process's CPU was spent on: the load
// generator, and the fake Slack Web API of a server it started.
func (r *ingestReport) benchDoes() string {
	if !r.started() {
		return "load generator"
	}
	return "load generator and fake Slack"
}

// inbox says whether every acknowledged event was stored: not checked on
// a server the bench did not start.
func (r *ingestReport) inbox() string {
	if !r.started() {
		return "not checked (a server the bench did not start)"
	}
	return fmt.Sprintf("%d of %d acknowledged\t(%d missing)", r.stored, r.stored+r.missing, r.missing)
}

func (r *ingestReport) write(w io.Writer) {
	fmt.Fprintf(w, "agentgate bench slack-ingest — %s\n", r.date.Format(time.DateOnly))
	fmt.Fprintf(w, "machine  %s\n", r.machine)
	fmt.Fprintf(w, "setup    %s\n", r.setup())
	fmt.Fprintf(w, "command  %s\n\n", r.opts.command)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "signed app_mention events (%s measured after %s warm-up)\n", r.elapsed, r.opts.warmup)
	fmt.Fprintf(tw, "  acknowledged\t%s events/s\t(%d in the window, %d sent in all, %d errors)\n",
		benchThousands(int64(r.perSecond())), r.measuredAcked, r.sent, r.errors.n)
	fmt.Fprintf(tw, "  acknowledgement latency\tp50 %s\tp99 %s\tmax %s\n", benchMs(r.p50), benchMs(r.p99), benchMs(r.max))
	fmt.Fprintf(tw, "  server CPU per event\t%s\t(%s over the window)\n", r.perEvent(r.serverCPU), r.serverCPU.Round(time.Millisecond))
	fmt.Fprintf(tw, "  bench process CPU per event\t%s\t(%s)\n", r.perEvent(r.benchCPU), r.benchDoes())
	fmt.Fprintf(tw, "  machine meanwhile\t%s\n", r.hostLoad())
	fmt.Fprintf(tw, "  in the durable inbox\t%s\n", r.inbox())
	if r.started() {
		fmt.Fprintf(tw, "  turned into runs meanwhile\t%d\n", r.processed)
	}
	fmt.Fprintf(tw, "  server RSS\tidle %s\tpeak %s\n", benchMiB(r.idleRSS), benchMiB(r.peakRSS))
	writeBenchErrors(tw, r.errors)
	tw.Flush()
	if r.cpuErr != nil {
		fmt.Fprintf(w, "  CPU: %v\n", r.cpuErr)
	}
	if r.rssErr != nil {
		fmt.Fprintf(w, "  memory: %v\n", r.rssErr)
	}
}

// writeMarkdown writes a section for docs/benchmarks.md.
func (r *ingestReport) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## agentgate bench slack-ingest\n\n")
	fmt.Fprintf(w, "```sh\ngo build -o /tmp/agentgate ./cmd/agentgate\n/tmp/%s\n```\n\n", r.opts.command)
	fmt.Fprintf(w, "%s, %s. %s.\n\n", r.date.Format(time.DateOnly), r.machine, r.setup())
	fmt.Fprintln(w, "| measure | value |")
	fmt.Fprintln(w, "|---|---:|")
	fmt.Fprintf(w, "| acknowledged events/s (%s, %d clients) | %s |\n", r.elapsed, r.opts.clients, benchThousands(int64(r.perSecond())))
	fmt.Fprintf(w, "| acknowledgement latency p50 / p99 / max | %s / %s / %s |\n", benchMs(r.p50), benchMs(r.p99), benchMs(r.max))
	fmt.Fprintf(w, "| server CPU per event | %s |\n", r.perEvent(r.serverCPU))
	fmt.Fprintf(w, "| bench process CPU per event (%s) | %s |\n", r.benchDoes(), r.perEvent(r.benchCPU))
	fmt.Fprintf(w, "| machine meanwhile | %s |\n", r.hostLoad())
	fmt.Fprintf(w, "| acknowledged events in the durable inbox | %s |\n", strings.ReplaceAll(r.inbox(), "\t", " "))
	fmt.Fprintf(w, "| errors | %d of %d sent |\n", r.errors.n, r.sent)
	if r.started() {
		fmt.Fprintf(w, "| turned into runs during the bench | %d |\n", r.processed)
	}
	fmt.Fprintf(w, "| server RSS idle / peak | %s / %s |\n", benchMiB(r.idleRSS), benchMiB(r.peakRSS))
}
