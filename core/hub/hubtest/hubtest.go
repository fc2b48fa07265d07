// Package hubtest is the suite every bridge that carries core.Hub change
// signals between replicas runs (core/hub/pghub, core/hub/redishub). It uses
// only core.Hub and the function a bridge returns.
//
// A bridge carries one kind of signal: "run id changed", which the engine
// sends when a run's journal or status changes and the approvals service
// when an approval of the run is decided (both call Hub.Changed). Deltas
// (streamed text) stay on the replica that produced them.
//
// Signals are hints that a bridge may lose while it connects or reconnects,
// so the tests that start or cut bridges announce a change until it is
// heard; once every replica has heard every other, one announcement must
// arrive, once.
package hubtest

import (
	"context"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Bridge is one replica's bridge under test.
type Bridge struct {
	// Run carries signals until ctx ends; it is the function pghub.Bridge
	// and redishub.Bridge return.
	Run func(ctx context.Context) error
	// Cut severs every connection the bridge holds to its server, as a
	// network failure or a server restart would, and returns how many it
	// cut. Nil skips the reconnect test.
	Cut func() int
}

// Join connects hub to a cluster as one more replica (the bridge sets
// hub.Broadcast) and returns its bridge without starting it. It registers
// its own cleanup with t.
type Join func(t *testing.T, hub *core.Hub) Bridge

// NewCluster returns the Join of a cluster that no other subtest shares (a
// channel, schema or prefix of its own).
type NewCluster func(t *testing.T) Join

// waitLimit bounds how long a test waits for a signal or for a bridge to
// stop before it declares the bridge stuck. It is a failure guard, not
// synchronisation.
const waitLimit = 10 * time.Second

// resend is how often a signal that may be lost is announced again while a
// test waits for it to be heard.
const resend = 20 * time.Millisecond

// Run runs the suite against the bridges newCluster's Join makes. Each
// subtest gets a fresh cluster and runs in parallel with the others.
func Run(t *testing.T, newCluster NewCluster) {
	tests := []struct {
		name string
		fn   func(t *testing.T, join Join)
	}{
		{"ChangesReachEveryOtherReplica", testChangesReachEveryOtherReplica},
		{"DeliveredOnce", testDeliveredOnce},
		{"BurstOfChanges", testBurstOfChanges},
		{"StopsWhenCancelled", testStopsWhenCancelled},
		{"StopsBeforeConnecting", testStopsBeforeConnecting},
		{"Reconnects", testReconnects},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newCluster(t))
		})
	}
}

// replica is one hub with its running bridge.
type replica struct {
	t       *testing.T
	name    string
	hub     *core.Hub
	bridge  Bridge
	cancel  context.CancelFunc
	stopped chan struct{} // closed when Run returned
	err     error         // what Run returned
}

// start joins a hub named name to the cluster and runs its bridge until the
// test ends.
func start(t *testing.T, join Join, name string) *replica {
	t.Helper()
	r := &replica{t: t, name: name, hub: &core.Hub{}, stopped: make(chan struct{})}
	r.bridge = join(t, r.hub)
	ctx, cancel := context.WithCancel(t.Context())
	r.cancel = cancel
	go func() {
		r.err = r.bridge.Run(ctx)
		close(r.stopped)
	}()
	t.Cleanup(func() { r.stop() })
	return r
}

// stop cancels the bridge and fails the test unless Run returns nil.
func (r *replica) stop() {
	r.t.Helper()
	r.cancel()
	select {
	case <-r.stopped:
	case <-time.After(waitLimit):
		r.t.Fatalf("%s: bridge still running %s after its context ended", r.name, waitLimit)
	}
	if r.err != nil {
		r.t.Errorf("%s: bridge stopped with %v, want nil", r.name, r.err)
	}
}

// subscribe subscribes to run id on r's hub until the test ends.
func (r *replica) subscribe(id string) <-chan core.Update {
	ch, unsub := r.hub.Subscribe(id)
	r.t.Cleanup(unsub)
	return ch
}

// expect waits for the change signal of run id on ch, which r subscribed.
func (r *replica) expect(ch <-chan core.Update, id string) {
	r.t.Helper()
	select {
	case u := <-ch:
		if u != (core.Update{RunID: id, Changed: true}) {
			r.t.Fatalf("%s: got %+v, want the change signal of %s", r.name, u, id)
		}
	case <-time.After(waitLimit):
		r.t.Fatalf("%s: no change signal of %s within %s", r.name, id, waitLimit)
	}
}

// quiet asserts that nothing more waits on ch, which r subscribed to run id.
func (r *replica) quiet(ch <-chan core.Update, id string) {
	r.t.Helper()
	select {
	case u := <-ch:
		r.t.Fatalf("%s: subscriber of %s got %+v as well, want nothing more", r.name, id, u)
	default:
	}
}

// link announces changes on from until every replica in to has heard one,
// so that from's sending and their listening have started.
func link(t *testing.T, from *replica, to ...*replica) {
	t.Helper()
	id := core.NewID("link")
	subs := make([]<-chan core.Update, len(to))
	for i, r := range to {
		subs[i] = r.subscribe(id)
	}
	tick := time.NewTicker(resend)
	defer tick.Stop()
	deadline := time.After(waitLimit)
	for i := 0; i < len(to); {
		from.hub.Changed(id)
		select {
		case <-subs[i]:
			i++
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s never heard %s's changes within %s", to[i].name, from.name, waitLimit)
		}
	}
}

// linkAll links every replica to every other.
func linkAll(t *testing.T, rs ...*replica) {
	t.Helper()
	for i, from := range rs {
		others := append(append([]*replica(nil), rs[:i]...), rs[i+1:]...)
		link(t, from, others...)
	}
}

func testChangesReachEveryOtherReplica(t *testing.T, join Join) {
	rs := []*replica{start(t, join, "a"), start(t, join, "b"), start(t, join, "c")}
	linkAll(t, rs...)
	others := make([]<-chan core.Update, len(rs)) // subscribers of a run nobody changes
	for i, r := range rs {
		others[i] = r.subscribe("run_other")
	}
	for _, from := range rs {
		id := "run_from_" + from.name
		subs := make([]<-chan core.Update, len(rs))
		for i, r := range rs {
			subs[i] = r.subscribe(id)
		}
		from.hub.Changed(id)
		for i, r := range rs {
			r.expect(subs[i], id) // from's own subscribers too
		}
	}
	// A run's change reaches that run's subscribers and nobody else's.
	for i, r := range rs {
		r.quiet(others[i], "run_other")
	}
}

func testDeliveredOnce(t *testing.T, join Join) {
	a, b := start(t, join, "a"), start(t, join, "b")
	linkAll(t, a, b)
	deliveredOnce(t, a, b)
}

// deliveredOnce checks that a change announced on a reaches a's subscribers
// once (its own signal coming back through the server is not delivered
// again) and b's once. a and b must be linked.
func deliveredOnce(t *testing.T, a, b *replica) {
	t.Helper()
	id := core.NewID("run")
	onA, onB := a.subscribe(id), b.subscribe(id)
	a.hub.Changed(id)
	a.expect(onA, id)
	b.expect(onB, id)
	// A signal each way after it: a bridge reads its server's signals in
	// order, so once a has heard b's and b has heard a's, every copy of id's
	// signal the server sent them has been read.
	for _, p := range [][2]*replica{{b, a}, {a, b}} {
		from, to := p[0], p[1]
		after := core.NewID("run")
		heard := to.subscribe(after)
		from.hub.Changed(after)
		to.expect(heard, after)
	}
	a.quiet(onA, id)
	b.quiet(onB, id)
}

// burst is how many changes testBurstOfChanges announces at once: fewer than
// a bridge may queue, more than one message may carry.
const burst = 300

// testBurstOfChanges: changes of many runs announced at once, as a busy
// replica makes them, each reach the other replica's subscribers of that
// run, once (a bridge may carry several in one message).
func testBurstOfChanges(t *testing.T, join Join) {
	a, b := start(t, join, "a"), start(t, join, "b")
	linkAll(t, a, b)
	ids := make([]string, burst)
	subs := make([]<-chan core.Update, burst)
	for i := range ids {
		ids[i] = core.NewID("run")
		subs[i] = b.subscribe(ids[i])
	}
	for _, id := range ids {
		a.hub.Changed(id)
	}
	for i, id := range ids {
		b.expect(subs[i], id)
	}
	deliveredOnce(t, a, b) // every copy the server sent b has been read
	for i, id := range ids {
		b.quiet(subs[i], id)
	}
}

func testStopsWhenCancelled(t *testing.T, join Join) {
	a, b, c := start(t, join, "a"), start(t, join, "b"), start(t, join, "c")
	linkAll(t, a, b, c)
	c.stop()
	// The stopped replica's hub still serves its own subscribers.
	id := core.NewID("run")
	local := c.subscribe(id)
	c.hub.Changed(id)
	c.expect(local, id)
	// The others carry on without it.
	deliveredOnce(t, a, b)
}

func testStopsBeforeConnecting(t *testing.T, join Join) {
	for _, when := range []string{"before Run", "as Run starts"} {
		t.Run(when, func(t *testing.T) {
			hub := &core.Hub{}
			br := join(t, hub)
			ctx, cancel := context.WithCancel(t.Context())
			if when == "before Run" {
				cancel()
			}
			done := make(chan error, 1)
			go func() { done <- br.Run(ctx) }()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run = %v, want nil", err)
				}
			case <-time.After(waitLimit):
				t.Fatalf("Run still running %s after its context ended", waitLimit)
			}
			// The hub still works locally once its bridge is gone.
			ch, unsub := hub.Subscribe("run_1")
			defer unsub()
			hub.Changed("run_1")
			if u := <-ch; u != (core.Update{RunID: "run_1", Changed: true}) {
				t.Errorf("local subscriber got %+v", u)
			}
		})
	}
}

func testReconnects(t *testing.T, join Join) {
	a, b := start(t, join, "a"), start(t, join, "b")
	if a.bridge.Cut == nil {
		t.Skip("the bridge has no Cut hook")
	}
	linkAll(t, a, b)
	for _, r := range []*replica{a, b} {
		if n := r.bridge.Cut(); n == 0 {
			t.Fatalf("%s: Cut severed no connection; the test would prove nothing", r.name)
		}
	}
	// Signals sent while a bridge reconnects may be lost; once both hear
	// each other again, they carry every signal once, as before.
	linkAll(t, a, b)
	deliveredOnce(t, a, b)
}
