package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
)

// inboxOf returns the harness's store as a core.Inbox, or skips the test.
func inboxOf(t *testing.T, h Harness) core.Inbox {
	t.Helper()
	ib, ok := h.Store.(core.Inbox)
	if !ok {
		t.Skip("store has no inbox")
	}
	return ib
}

func inboxMsg(platform, key string, received time.Time) core.InboxMessage {
	return core.InboxMessage{Platform: platform, Key: key, Payload: []byte(`{"key":"` + key + `"}`), ReceivedAt: received}
}

func appendInbox(t *testing.T, ib core.Inbox, want int, msgs ...core.InboxMessage) {
	t.Helper()
	n, err := ib.AppendInbox(t.Context(), msgs)
	if err != nil || n != want {
		t.Fatalf("AppendInbox(%d messages) = %d, %v; want %d added", len(msgs), n, err, want)
	}
}

// claimInbox claims slack messages for owner at now for a minute and returns them.
func claimInbox(t *testing.T, ib core.Inbox, owner string, now time.Time, limit int) []core.InboxMessage {
	t.Helper()
	msgs, err := ib.ClaimInbox(t.Context(), "slack", owner, now, now.Add(time.Minute), limit)
	if err != nil {
		t.Fatalf("ClaimInbox(%s): %v", owner, err)
	}
	return msgs
}

// wantClaim claims like claimInbox and checks the keys (in order) and, when
// attempts are given, each message's attempts.
func wantClaim(t *testing.T, ib core.Inbox, owner string, now time.Time, limit int, keys []string, attempts ...int) []core.InboxMessage {
	t.Helper()
	msgs := claimInbox(t, ib, owner, now, limit)
	got := make([]string, len(msgs))
	for i, m := range msgs {
		got[i] = m.Key
	}
	if !slices.Equal(got, keys) {
		t.Fatalf("%s claimed %v at %s, want %v", owner, got, now.Sub(t0), keys)
	}
	for i, m := range msgs {
		if len(attempts) == len(keys) && m.Attempts != attempts[i] {
			t.Errorf("%s claimed %s with attempts %d, want %d", owner, m.Key, m.Attempts, attempts[i])
		}
	}
	return msgs
}

// inboxRun is the input of CreateRun for the slack message key, in a new session.
func inboxRun(key string) core.NewRun {
	nr := newRun(core.NewID("ses"), agentA, "u1", "hello", at(0))
	nr.Platform, nr.DedupeKey = "slack", key
	return nr
}

// testInboxAppend: a batch is stored once per (platform, key), duplicates in
// the batch and across batches skipped, the first delivery kept.
func testInboxAppend(t *testing.T, h Harness) {
	ib := inboxOf(t, h)
	first := inboxMsg("slack", "msg:C1:1.0001", at(0))
	retry := inboxMsg("slack", "msg:C1:1.0001", at(2*time.Second))
	retry.Payload = []byte(`{"retry":true}`)
	appendInbox(t, ib, 2, first, inboxMsg("slack", "msg:C1:1.0002", at(time.Second)), retry)
	appendInbox(t, ib, 2,
		inboxMsg("slack", "msg:C1:1.0002", at(3*time.Second)),   // a retry of the second batch's message
		inboxMsg("slack", "msg:C1:1.0003", at(4*time.Second)),   // new
		inboxMsg("discord", "msg:C1:1.0001", at(5*time.Second))) // same key, other platform
	appendInbox(t, ib, 0)

	msgs := wantClaim(t, ib, "n1", at(time.Minute), 10, []string{"msg:C1:1.0001", "msg:C1:1.0002", "msg:C1:1.0003"}, 1, 1, 1)
	sameJSON(t, "payload of the first delivery", msgs[0].Payload, first.Payload)
	sameTime(t, "received_at of the first delivery", msgs[0].ReceivedAt, first.ReceivedAt)
	if msgs[0].Platform != "slack" {
		t.Errorf("platform = %q, want slack", msgs[0].Platform)
	}
	other, err := ib.ClaimInbox(t.Context(), "discord", "n1", at(time.Minute), at(2*time.Minute), 10)
	if err != nil || len(other) != 1 || other[0].Key != "msg:C1:1.0001" {
		t.Fatalf("ClaimInbox(discord) = %+v, %v; want its one message", other, err)
	}
}

// testInboxOrder: messages are claimed oldest received first, whatever the
// order of the batches that stored them, limit at a time.
func testInboxOrder(t *testing.T, h Harness) {
	ib := inboxOf(t, h)
	appendInbox(t, ib, 1, inboxMsg("slack", "k3", at(3*time.Second)))
	appendInbox(t, ib, 3, inboxMsg("slack", "k1", at(time.Second)), inboxMsg("slack", "k2", at(2*time.Second)),
		inboxMsg("slack", "k4", at(4*time.Second)))
	wantClaim(t, ib, "n1", at(time.Minute), 2, []string{"k1", "k2"})
	wantClaim(t, ib, "n2", at(time.Minute), 5, []string{"k3", "k4"})
	wantClaim(t, ib, "n3", at(time.Minute), 5, nil)
}

// testInboxCreateRun: CreateRun marks an appended message processed in the
// run's transaction; a message processed, with or without a run, starts no
// other run and is not stored or claimed again.
func testInboxCreateRun(t *testing.T, h Harness) {
	ib := inboxOf(t, h)
	ctx := t.Context()
	appendInbox(t, ib, 2, inboxMsg("slack", "k1", at(0)), inboxMsg("slack", "k2", at(time.Second)))
	r1 := create(t, h, inboxRun("k1"))
	wantJobs(t, h, r1.ID)
	wantClaim(t, ib, "n1", at(time.Minute), 10, []string{"k2"})

	_, err := h.Store.CreateRun(ctx, inboxRun("k1"))
	var dup *core.DuplicateError
	if !errors.As(err, &dup) || dup.RunID != r1.ID {
		t.Fatalf("CreateRun of a processed message = %v, want a duplicate naming run %s", err, r1.ID)
	}
	appendInbox(t, ib, 0, inboxMsg("slack", "k1", at(2*time.Second))) // Slack retries after processing

	// Processed without a run: no run later either.
	if err := ib.SettleInbox(ctx, "slack", "k2", "", at(time.Minute)); err != nil {
		t.Fatalf("SettleInbox: %v", err)
	}
	wantClaim(t, ib, "n1", at(2*time.Minute), 10, nil)
	_, err = h.Store.CreateRun(ctx, inboxRun("k2"))
	if !errors.As(err, &dup) || dup.RunID != "" {
		t.Fatalf("CreateRun of a settled message = %v, want a duplicate naming no run", err)
	}

	// A claimed message is still CreateRun's to mark (the claim only keeps
	// other processors off it); a failed one is processed.
	appendInbox(t, ib, 2, inboxMsg("slack", "k3", at(3*time.Second)), inboxMsg("slack", "k4", at(4*time.Second)))
	wantClaim(t, ib, "n1", at(3*time.Minute), 10, []string{"k3", "k4"})
	r3 := create(t, h, inboxRun("k3"))
	if err := ib.SettleInbox(ctx, "slack", "k4", "agent gone", at(3*time.Minute)); err != nil {
		t.Fatalf("SettleInbox: %v", err)
	}
	if err := ib.SettleInbox(ctx, "slack", "k3", "late", at(3*time.Minute)); err != nil {
		t.Fatalf("SettleInbox of a message with a run: %v", err)
	}
	if _, err := h.Store.CreateRun(ctx, inboxRun("k3")); !errors.As(err, &dup) || dup.RunID != r3.ID {
		t.Fatalf("CreateRun after a late SettleInbox = %v, want a duplicate naming run %s", err, r3.ID)
	}
	wantClaim(t, ib, "n2", at(time.Hour), 10, nil)

	// A key the inbox never saw (an API caller's) is recorded by CreateRun.
	r5 := create(t, h, inboxRun("k5"))
	appendInbox(t, ib, 0, inboxMsg("slack", "k5", at(5*time.Second)))
	wantClaim(t, ib, "n2", at(time.Hour), 10, nil)
	wantJobs(t, h, r3.ID, r5.ID)
}

// testInboxBacklog: the backlog counts each platform's messages not yet
// processed, claimed ones and ones waiting for a retry included, with the
// oldest one's arrival; a platform with none is absent.
func testInboxBacklog(t *testing.T, h Harness) {
	ib := inboxOf(t, h)
	bl, ok := h.Store.(core.InboxBacklogger)
	if !ok {
		t.Fatal("the store has an inbox but does not tell its backlog (core.InboxBacklogger)")
	}
	ctx := t.Context()
	want := func(when string, exp map[string]core.InboxBacklog) {
		t.Helper()
		got, err := bl.InboxBacklog(ctx)
		if err != nil {
			t.Fatalf("InboxBacklog %s: %v", when, err)
		}
		if len(got) != len(exp) {
			t.Fatalf("InboxBacklog %s = %+v, want %+v", when, got, exp)
		}
		for p, e := range exp {
			if g, ok := got[p]; !ok || g.Waiting != e.Waiting || !g.Oldest.Equal(e.Oldest) {
				t.Fatalf("InboxBacklog %s: %s = %+v, want %+v (all: %+v)", when, p, g, e, got)
			}
		}
	}
	want("of an empty inbox", map[string]core.InboxBacklog{})

	appendInbox(t, ib, 4, inboxMsg("slack", "k1", at(time.Second)), inboxMsg("slack", "k2", at(2*time.Second)),
		inboxMsg("slack", "k3", at(3*time.Second)), inboxMsg("telegram", "k1", at(5*time.Second)))
	want("after four appends", map[string]core.InboxBacklog{
		"slack":    {Waiting: 3, Oldest: at(time.Second)},
		"telegram": {Waiting: 1, Oldest: at(5 * time.Second)},
	})

	// k1 becomes a run, k2 is claimed and then put back for a retry, k3 is
	// settled without a run: only k2 waits.
	wantClaim(t, ib, "n1", at(time.Minute), 2, []string{"k1", "k2"})
	create(t, h, inboxRun("k1"))
	if err := ib.RetryInbox(ctx, "slack", "k2", "model down", at(time.Hour)); err != nil {
		t.Fatalf("RetryInbox: %v", err)
	}
	if err := ib.SettleInbox(ctx, "slack", "k3", "", at(time.Minute)); err != nil {
		t.Fatalf("SettleInbox: %v", err)
	}
	want("after a run, a retry and a settlement", map[string]core.InboxBacklog{
		"slack":    {Waiting: 1, Oldest: at(2 * time.Second)},
		"telegram": {Waiting: 1, Oldest: at(5 * time.Second)},
	})
	if err := ib.SettleInbox(ctx, "telegram", "k1", "agent gone", at(time.Minute)); err != nil {
		t.Fatalf("SettleInbox: %v", err)
	}
	want("once telegram's message failed", map[string]core.InboxBacklog{"slack": {Waiting: 1, Oldest: at(2 * time.Second)}})
}

// testInboxClaimConcurrent: processors claiming at once each get other
// messages, and a message starts one run however many CreateRun calls race
// for it (a processor whose claim ran out, a second replica).
func testInboxClaimConcurrent(t *testing.T, h Harness) {
	ib := inboxOf(t, h)
	ctx := t.Context()
	const n, workers = 40, 4
	var msgs []core.InboxMessage
	keys := make([]string, n)
	for i := range n {
		keys[i] = fmt.Sprintf("msg:C1:%d.0001", 1000+i)
		msgs = append(msgs, inboxMsg("slack", keys[i], at(time.Duration(i)*time.Millisecond)))
	}
	appendInbox(t, ib, n, msgs...)

	var mu sync.Mutex
	claimedBy := map[string][]string{}
	runs := map[string][]string{}
	started := func(key, runID string, err error) {
		var dup *core.DuplicateError
		switch {
		case err == nil:
			mu.Lock()
			runs[key] = append(runs[key], runID)
			mu.Unlock()
		case !errors.As(err, &dup):
			t.Errorf("CreateRun(%s): %v, want nil or a duplicate", key, err)
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		owner := fmt.Sprintf("w%d", w)
		wg.Go(func() { // a processor
			for {
				got, err := ib.ClaimInbox(ctx, "slack", owner, at(0), at(time.Minute), 3)
				if err != nil {
					t.Errorf("ClaimInbox(%s): %v", owner, err)
					return
				}
				if len(got) == 0 {
					return
				}
				for _, m := range got {
					mu.Lock()
					claimedBy[m.Key] = append(claimedBy[m.Key], owner)
					mu.Unlock()
					nr := inboxRun(m.Key)
					_, err := h.Store.CreateRun(ctx, nr)
					started(m.Key, nr.Run.ID, err)
				}
			}
		})
		wg.Go(func() { // a stale processor that starts every message, newest first
			for _, key := range slices.Backward(keys) {
				nr := inboxRun(key)
				_, err := h.Store.CreateRun(ctx, nr)
				started(key, nr.Run.ID, err)
			}
		})
	}
	wg.Wait()
	for _, key := range keys {
		if len(claimedBy[key]) > 1 {
			t.Errorf("%s claimed by %v, want one processor", key, claimedBy[key])
		}
		if len(runs[key]) != 1 {
			t.Errorf("%s started runs %v, want exactly one", key, runs[key])
		}
	}
	if c, err := h.Store.CountRuns(ctx); err != nil || c[core.RunQueued] != n {
		t.Errorf("runs = %v, %v; want %d queued", c, err, n)
	}
	wantClaim(t, ib, "w0", at(time.Hour), 100, nil)
}

// testInboxRestart: a claim keeps a message from other processors until it
// runs out or its owner releases it (a restarted node that kept its name);
// a retried message waits for its time. Attempts count the claims, less
// those released unhanded.
func testInboxRestart(t *testing.T, h Harness) {
	ib := inboxOf(t, h)
	ctx := t.Context()
	appendInbox(t, ib, 3, inboxMsg("slack", "k1", at(0)), inboxMsg("slack", "k2", at(time.Second)),
		inboxMsg("slack", "k3", at(2*time.Second)))
	wantClaim(t, ib, "n1", at(0), 2, []string{"k1", "k2"}, 1, 1)
	wantClaim(t, ib, "n2", at(0), 10, []string{"k3"}, 1)
	wantClaim(t, ib, "n2", at(30*time.Second), 10, nil)

	// n1 dies and starts again under its name.
	if n, err := ib.ReleaseInbox(ctx, "discord", "n1", false); err != nil || n != 0 {
		t.Fatalf("ReleaseInbox(discord, n1) = %d, %v; want 0", n, err)
	}
	if n, err := ib.ReleaseInbox(ctx, "slack", "n1", false); err != nil || n != 2 {
		t.Fatalf("ReleaseInbox(slack, n1) = %d, %v; want 2", n, err)
	}
	wantClaim(t, ib, "n1", at(30*time.Second), 10, []string{"k1", "k2"}, 2, 2)

	// Every claim runs out: another node takes the messages.
	wantClaim(t, ib, "n3", at(2*time.Minute), 10, []string{"k1", "k2", "k3"}, 3, 3, 2)

	// k1 failed and waits for its retry; the others' claims run out first.
	if err := ib.RetryInbox(ctx, "slack", "k1", "store unreachable", at(10*time.Minute)); err != nil {
		t.Fatalf("RetryInbox: %v", err)
	}
	wantClaim(t, ib, "n4", at(5*time.Minute), 10, []string{"k2", "k3"}, 4, 3)
	wantClaim(t, ib, "n5", at(10*time.Minute), 10, []string{"k1", "k2", "k3"}, 4, 5, 4)
	if n, err := ib.ReleaseInbox(ctx, "slack", "n3", false); err != nil || n != 0 {
		t.Fatalf("ReleaseInbox(slack, n3) = %d, %v; want 0 (its claims were taken over)", n, err)
	}

	// n5 stops before handing them over: their attempts are given back.
	if n, err := ib.ReleaseInbox(ctx, "slack", "n5", true); err != nil || n != 3 {
		t.Fatalf("ReleaseInbox(slack, n5, unhanded) = %d, %v; want 3", n, err)
	}
	wantClaim(t, ib, "n6", at(10*time.Minute), 10, []string{"k1", "k2", "k3"}, 4, 5, 4)
}
