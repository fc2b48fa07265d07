package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
)

// prune calls the store's Prune and checks how many it removed.
func prune(t *testing.T, p core.Pruner, what core.Prunable, before time.Time, limit, want int) {
	t.Helper()
	n, err := p.Prune(t.Context(), what, before, limit)
	if err != nil || n != want {
		t.Fatalf("Prune(%s, before %s, limit %d) = %d, %v; want %d", what, before.Sub(t0), limit, n, err, want)
	}
}

// testPruneRuns: finished runs older than the cutoff go with their journal,
// approvals and the sessions they leave empty, a batch at a time; live runs
// (running, paused) and recent ones stay.
func testPruneRuns(t *testing.T, h Harness) {
	p, ok := h.Store.(core.Pruner)
	if !ok {
		t.Skip("store does not prune")
	}
	ctx := t.Context()
	// old1: decided approval, then finished an hour in; alone in its session.
	old1, a1 := pausedRun(t, h, at(2*time.Hour))
	decide(t, h, a1.ID, core.ApprovalApproved, "u-boss")
	claim(t, h, old1.ID, "w1", at(time.Minute))
	finish(t, h, old1.ID, "w1", core.RunFailed, at(time.Hour))
	// old2 and recent share a session: old2 goes, the session stays.
	old2 := createIn(t, h, t0)
	claim(t, h, old2.ID, "w1", t0)
	finish(t, h, old2.ID, "w1", core.RunCompleted, at(time.Hour))
	recent := create(t, h, newRun(old2.SessionID, agentA, "u1", "again", at(time.Hour)))
	claim(t, h, recent.ID, "w1", at(time.Hour))
	finish(t, h, recent.ID, "w1", core.RunCompleted, at(10*time.Hour))
	running := createIn(t, h, t0)
	claim(t, h, running.ID, "w1", t0)
	paused, a5 := pausedRun(t, h, at(100*time.Hour))

	before := at(5 * time.Hour)
	prune(t, p, core.PruneRuns, before, 1, 1)
	prune(t, p, core.PruneRuns, before, 10, 1)
	prune(t, p, core.PruneRuns, before, 10, 0)

	for _, id := range []string{old1.ID, old2.ID} {
		if _, err := h.Store.GetRun(ctx, id); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("GetRun(%s) after pruning = %v, want not found", id, err)
		}
		if evs, err := h.Store.Events(ctx, id, 0, 0); err == nil && len(evs) > 0 {
			t.Errorf("the journal of pruned run %s kept %d events", id, len(evs))
		}
	}
	if _, err := h.Store.GetApproval(ctx, a1.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("GetApproval of a pruned run's approval = %v, want not found", err)
	}
	if _, err := h.Store.GetSession(ctx, old1.SessionID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("GetSession of a session left without runs = %v, want not found", err)
	}
	if _, err := h.Store.GetSession(ctx, old2.SessionID); err != nil {
		t.Errorf("GetSession of a session with a recent run: %v", err)
	}
	wantStatus(t, h, recent.ID, core.RunCompleted)
	if len(journal(t, h, recent.ID)) == 0 {
		t.Errorf("a recent run lost its journal")
	}
	wantStatus(t, h, running.ID, core.RunRunning)
	wantStatus(t, h, paused.ID, core.RunPaused)
	if a := getApproval(t, h, a5.ID); a.Status != core.ApprovalPending {
		t.Errorf("a paused run's approval is %s, want pending", a.Status)
	}
	if _, err := p.Prune(ctx, core.PruneRuns, before, 0); err == nil {
		t.Errorf("Prune with limit 0: no error")
	}
	if _, err := p.Prune(ctx, "everything", before, 10); err == nil {
		t.Errorf("Prune of an unknown kind: no error")
	}
}

// testPruneRest: processed inbox messages, outbox records, dead letters and
// audit entries older than the cutoff go; waiting messages and newer rows
// stay.
func testPruneRest(t *testing.T, h Harness) {
	p, ok := h.Store.(core.Pruner)
	if !ok {
		t.Skip("store does not prune")
	}
	ctx := t.Context()
	before := at(5 * time.Hour)

	ib := inboxOf(t, h)
	appendInbox(t, ib, 3, inboxMsg("slack", "done-old", t0), inboxMsg("slack", "done-new", t0), inboxMsg("slack", "waiting", t0))
	for key, when := range map[string]time.Time{"done-old": at(time.Hour), "done-new": at(10 * time.Hour)} {
		if err := ib.SettleInbox(ctx, "slack", key, "", when); err != nil {
			t.Fatal(err)
		}
	}
	prune(t, p, core.PruneInbox, before, 10, 1)
	appendInbox(t, ib, 1, inboxMsg("slack", "done-old", at(6*time.Hour)), inboxMsg("slack", "done-new", at(6*time.Hour)))
	wantClaim(t, ib, "w1", at(6*time.Hour), 10, []string{"waiting", "done-old"})

	// Old rows that stay: the card of an approval still pending (its
	// clicks are checked against it, and its decision edits it) and a send
	// whose outcome is unknown (a retried job would post it again).
	ob := h.Store.(core.Outbox)
	_, pending := pausedRun(t, h, at(time.Hour))
	card := core.CardKey("slack", pending.ID)
	for key, st := range map[string]struct {
		state string
		when  time.Time
	}{
		"sent-old": {core.SendSent, at(time.Hour)}, "sent-new": {core.SendSent, at(10 * time.Hour)},
		card: {core.SendSent, at(time.Hour)}, "uncertain-old": {core.SendUncertain, at(time.Hour)},
	} {
		if _, _, err := ob.ClaimSend(ctx, key, t0); err != nil {
			t.Fatal(err)
		}
		if err := ob.SetSendState(ctx, key, st.state, "ref", st.when); err != nil {
			t.Fatal(err)
		}
	}
	prune(t, p, core.PruneOutbox, before, 10, 1)
	if _, _, err := ob.SendRef(ctx, "sent-old"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("SendRef of a pruned send = %v, want not found", err)
	}
	for key, want := range map[string]string{"sent-new": core.SendSent, card: core.SendSent, "uncertain-old": core.SendUncertain} {
		if state, _, err := ob.SendRef(ctx, key); err != nil || state != want {
			t.Errorf("SendRef(%s) after pruning = %q, %v; want it kept, %s", key, state, err, want)
		}
	}

	for _, when := range []time.Time{at(time.Hour), at(10 * time.Hour)} {
		if err := h.Store.AppendAudit(ctx, core.AuditEntry{At: when, Principal: "key:root", Action: "run.cancel"}); err != nil {
			t.Fatal(err)
		}
	}
	prune(t, p, core.PruneAudit, before, 10, 1)
	if got := listAudit(t, h, core.AuditFilter{}); len(got) != 1 || !got[0].At.Equal(at(10*time.Hour)) {
		t.Errorf("audit after pruning = %+v, want the newer entry only", got)
	}
}

// testBlobRefs: the journal names the blobs of user messages' attachments
// and of tool results' files, and no longer those of a pruned run.
func testBlobRefs(t *testing.T, h Harness) {
	refs, ok := h.Store.(core.BlobReferrer)
	if !ok {
		t.Skip("store does not list blob references")
	}
	p := h.Store.(core.Pruner)
	ctx := t.Context()
	photo, chart, other := core.BlobID([]byte("photo")), core.BlobID([]byte("chart")), core.BlobID([]byte("other"))
	nr := newRun(core.NewID("ses"), agentA, "u1", "what is on this?", t0)
	nr.Events = []core.Event{core.NewEvent(core.EventUserMessage, core.UserMessage{Text: "what is on this?", UserID: "u1",
		Attachments: []core.Attachment{{ID: photo, Name: "photo.png", MIME: "image/png", Size: 5}, {Name: "huge.zip", Note: "too large"}}})}
	r := create(t, h, nr)
	claim(t, h, r.ID, "w1", t0)
	if _, err := h.Store.AppendEvents(ctx, r.ID, "w1", []core.Event{core.NewEvent(core.EventToolResult, core.ToolResult{
		ToolCallID: "c1", Content: "plotted", Files: []core.Attachment{{ID: chart, Name: "chart.png", MIME: "image/png", Size: 5}}})}); err != nil {
		t.Fatal(err)
	}
	kept := createIn(t, h, t0) // a run whose message names no file
	got, err := refs.BlobRefs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !got[photo] || !got[chart] || got[other] || len(got) != 2 {
		t.Fatalf("BlobRefs = %v, want the attachment %s and the tool's file %s only", got, photo, chart)
	}
	finish(t, h, r.ID, "w1", core.RunCompleted, at(time.Hour))
	prune(t, p, core.PruneRuns, at(2*time.Hour), 10, 1)
	prune(t, p, core.PruneBlobs, at(2*time.Hour), 10, 0) // not the store's own: retention.Blobs asks BlobRefs
	if got, err = refs.BlobRefs(ctx); err != nil || len(got) != 0 {
		t.Fatalf("BlobRefs after the run was pruned = %v, %v; want none", got, err)
	}
	wantStatus(t, h, kept.ID, core.RunQueued)
}
