package core

import (
	"context"
	"strings"
	"sync"
)

// Update is a live notification about a run: either a text fragment the
// model is streaming (Delta) or a signal that the run's journal or status
// changed (Changed; read the store for what). Updates are best effort and not
// durable: a subscriber that falls behind loses deltas, never journal entries,
// which it reads from the store.
type Update struct {
	RunID   string
	Delta   string
	Changed bool
	// Status is the run's status after the change when the publisher knows
	// it (the engine does), "" when it does not (another process's signal):
	// a waiter may skip reading a run that is still running.
	Status RunStatus
	// Run, when set, is the run as the change left it (the engine's finish
	// and pause): a waiter need not read it back. Read only.
	Run *Run
}

// Hub fans out run updates to in-process subscribers (SSE streams, waiting
// API calls, chat renderers). The zero value is ready to use.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[chan Update]bool // subscriber → wants deltas
	// Broadcast, when set, is called with every local change signal so other
	// processes can be told (see Deliver); set it before use.
	Broadcast func(runID string)
}

// Subscribe returns a channel of updates for run id and a function that ends
// the subscription. The channel is buffered; slow readers lose deltas.
func (h *Hub) Subscribe(id string) (<-chan Update, func()) { return h.subscribe(id, true) }

// SubscribeChanges is Subscribe for a reader that needs no streamed text
// (a request waiting for the run to settle): it gets the change signals
// only, and is not woken for every word the model streams.
func (h *Hub) SubscribeChanges(id string) (<-chan Update, func()) { return h.subscribe(id, false) }

func (h *Hub) subscribe(id string, deltas bool) (<-chan Update, func()) {
	ch := make(chan Update, 256)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = make(map[string]map[chan Update]bool)
	}
	if h.subs[id] == nil {
		h.subs[id] = make(map[chan Update]bool)
	}
	h.subs[id][ch] = deltas
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[id], ch)
		if len(h.subs[id]) == 0 {
			delete(h.subs, id)
		}
		h.mu.Unlock()
	}
}

// Publish sends u to the subscribers of u.RunID without blocking. A Changed
// update is never dropped: when a buffer is full, the oldest entry gives way.
func (h *Hub) Publish(u Update) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch, deltas := range h.subs[u.RunID] {
		if !u.Changed && !deltas {
			continue
		}
		select {
		case ch <- u:
			continue
		default:
		}
		if !u.Changed {
			continue
		}
		select { // make room for the change signal
		case <-ch:
		default:
		}
		select {
		case ch <- u:
		default:
		}
	}
}

// Changed announces that run id's journal or status changed, here and,
// through Broadcast, to other processes.
func (h *Hub) Changed(id string) { h.ChangedTo(id, "") }

// ChangedTo is Changed by a publisher that knows the run's status now.
func (h *Hub) ChangedTo(id string, status RunStatus) {
	h.change(Update{RunID: id, Changed: true, Status: status})
}

// Settled is ChangedTo by a publisher that holds the run as its change
// left it (finished or paused).
func (h *Hub) Settled(run Run) {
	h.change(Update{RunID: run.ID, Changed: true, Status: run.Status, Run: &run})
}

// change publishes change u here and, through Broadcast, to other processes.
func (h *Hub) change(u Update) {
	h.Publish(u)
	if h.Broadcast != nil {
		h.Broadcast(u.RunID)
	}
}

// Deliver announces a change another process broadcast, to local
// subscribers only.
func (h *Hub) Deliver(id string) { h.Publish(Update{RunID: id, Changed: true}) }

// Outgoing makes the hub's change signals go to the channel it returns, for
// a bridge to carry to other processes (core/hub/pghub, core/hub/redishub):
// up to 1024 wait there; one more is dropped (a hint: the waiter's poll
// covers it). It sets Broadcast; call it before use.
func (h *Hub) Outgoing() <-chan string {
	out := make(chan string, 1024)
	h.Broadcast = func(id string) {
		select {
		case out <- id:
		default:
		}
	}
	return out
}

// A bridge message carries at most maxSignals change signals and stops
// growing past maxSignalBytes (PostgreSQL's NOTIFY takes under 8000 bytes).
const (
	maxSignals     = 100
	maxSignalBytes = 4000
)

// NextSignals waits for the next change signal on out and returns the
// message a bridge sends for it and for those queued behind it (up to
// maxSignals and maxSignalBytes): origin, then the run ids, separated by
// spaces. Under load the signals that arrive while a message is on its way
// go out together in the next. ok is false when ctx ended first.
func NextSignals(ctx context.Context, out <-chan string, origin string) (msg string, ok bool) {
	var b strings.Builder
	b.WriteString(origin)
	select {
	case <-ctx.Done():
		return "", false
	case id := <-out:
		b.WriteString(" " + id)
	}
	for n := 1; n < maxSignals && b.Len() < maxSignalBytes; n++ {
		select {
		case id := <-out:
			b.WriteString(" " + id)
		default:
			return b.String(), true
		}
	}
	return b.String(), true
}

// DeliverSignals delivers the change signals of a message NextSignals made
// in another process to local subscribers; a message from origin (this
// process's own, back from the server) is skipped.
func (h *Hub) DeliverSignals(msg, origin string) {
	from, ids, ok := strings.Cut(msg, " ")
	if !ok || from == origin {
		return
	}
	for id := range strings.FieldsSeq(ids) {
		h.Deliver(id)
	}
}
