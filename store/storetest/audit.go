package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
)

// This file checks the principal fields (Run.StartedBy,
// Approval.DecidedByName) and the audit log (core.AuditLog).

func testStartedBy(t *testing.T, h Harness) {
	ctx := t.Context()
	nr := newRun(core.NewID("ses"), agentA, "u1", "deploy", t0)
	nr.Run.StartedBy = "key:ci"
	r := create(t, h, nr)
	if r.StartedBy != "key:ci" {
		t.Errorf("CreateRun returned started_by %q, want key:ci", r.StartedBy)
	}
	anon := createIn(t, h, at(time.Second))
	if got := getRun(t, h, r.ID).StartedBy; got != "key:ci" {
		t.Errorf("GetRun started_by = %q, want key:ci", got)
	}
	if got := getRun(t, h, anon.ID).StartedBy; got != "" {
		t.Errorf("GetRun of a run started by nobody: started_by = %q, want empty", got)
	}
	p, err := h.Store.ListRuns(ctx, core.RunFilter{})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	got := map[string]string{}
	for _, x := range p.Items {
		got[x.ID] = x.StartedBy
	}
	if want := map[string]string{r.ID: "key:ci", anon.ID: ""}; !maps.Equal(got, want) {
		t.Errorf("ListRuns started_by by run = %v, want %v", got, want)
	}
	// A claimed run (a read through another path) keeps it.
	if c := claim(t, h, r.ID, "w1", at(time.Minute)); c.StartedBy != "key:ci" {
		t.Errorf("ClaimRun returned started_by %q, want key:ci", c.StartedBy)
	}
}

// listAudit lists every audit entry matching f (one page of at most 500).
func listAudit(t *testing.T, h Harness, f core.AuditFilter) []core.AuditEntry {
	t.Helper()
	f.Limit = 500
	p, err := h.Store.ListAudit(t.Context(), f)
	if err != nil {
		t.Fatalf("ListAudit(%+v): %v", f, err)
	}
	if p.NextCursor != "" {
		t.Fatalf("ListAudit(%+v): next cursor %q on a page that holds everything", f, p.NextCursor)
	}
	return p.Items
}

// wantAudit checks got against want field by field, ignoring IDs, which must
// be set and run newest (highest) first.
func wantAudit(t *testing.T, what string, got, want []core.AuditEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d entries %+v, want %d %+v", what, len(got), got, len(want), want)
		return
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID == 0 {
			t.Errorf("%s: entry %d has no id", what, i)
		}
		if i > 0 && g.ID >= got[i-1].ID {
			t.Errorf("%s: entry %d id %d after id %d, want newest (highest id) first", what, i, g.ID, got[i-1].ID)
		}
		if !g.At.Equal(w.At) {
			t.Errorf("%s: entry %d at %v, want %v", what, i, g.At, w.At)
		}
		g.ID, g.At, w.ID, w.At = 0, time.Time{}, 0, time.Time{}
		if g != w {
			t.Errorf("%s: entry %d = %+v, want %+v", what, i, g, w)
		}
	}
}

func testDecideApprovalAudit(t *testing.T, h Harness) {
	ctx := t.Context()
	_, a := pausedRun(t, h, at(time.Hour))
	entry := core.AuditEntry{Principal: "slack:T1/U1", Route: "slack", Action: core.AuditApprove, Target: a.ID, Detail: "from the card"}
	e := entry
	got, err := h.Store.DecideApproval(ctx, a.ID, core.Decision{
		Status: core.ApprovalApproved, By: "slack:T1/U1", ByName: "Ana", Via: "slack",
		ArgsSHA256: a.ArgsSHA256, At: at(time.Minute), Audit: &e,
	})
	if err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	if got.DecidedByName != "Ana" || got.DecidedBy != "slack:T1/U1" {
		t.Errorf("decided approval: decided by %q shown as %q, want slack:T1/U1 shown as Ana", got.DecidedBy, got.DecidedByName)
	}
	if stored := getApproval(t, h, a.ID); stored.DecidedByName != "Ana" {
		t.Errorf("GetApproval decided_by_name = %q, want Ana", stored.DecidedByName)
	}
	p, err := h.Store.ListApprovals(ctx, core.ApprovalFilter{})
	if err != nil || len(p.Items) != 1 || p.Items[0].DecidedByName != "Ana" {
		t.Errorf("ListApprovals = %+v, %v; want the approval decided by Ana", p.Items, err)
	}
	want := entry
	want.At, want.Outcome = at(time.Minute), core.AuditOK // defaulted from the decision
	wantAudit(t, "audit after the decision", listAudit(t, h, core.AuditFilter{}), []core.AuditEntry{want})

	// A refused decision writes nothing from inside the store.
	late := core.AuditEntry{Principal: "key:ops", Route: "api", Action: core.AuditDeny, Target: a.ID}
	_, err = h.Store.DecideApproval(ctx, a.ID, core.Decision{
		Status: core.ApprovalDenied, By: "key:ops", ByName: "ops", Via: "api", At: at(2 * time.Minute), Audit: &late,
	})
	var np *core.NotPendingError
	if !errors.As(err, &np) {
		t.Fatalf("second DecideApproval: err = %v, want *core.NotPendingError", err)
	}
	if stored := getApproval(t, h, a.ID); stored.DecidedByName != "Ana" {
		t.Errorf("decided_by_name after a late decision = %q, want Ana", stored.DecidedByName)
	}
	wantAudit(t, "audit after a late decision", listAudit(t, h, core.AuditFilter{}), []core.AuditEntry{want})

	_, b := pausedRun(t, h, at(time.Hour))
	mismatch := core.AuditEntry{Principal: "key:ops", Route: "api", Action: core.AuditApprove, Target: b.ID}
	_, err = h.Store.DecideApproval(ctx, b.ID, core.Decision{
		Status: core.ApprovalApproved, By: "key:ops", ByName: "ops", Via: "api", ArgsSHA256: "sha-of-other-arguments",
		At: at(3 * time.Minute), Audit: &mismatch,
	})
	wantErr(t, "DecideApproval for other arguments", err, core.ErrArgsMismatch)
	if stored := getApproval(t, h, b.ID); stored.DecidedByName != "" {
		t.Errorf("decided_by_name after a refused decision = %q, want empty", stored.DecidedByName)
	}
	wantAudit(t, "audit after a decision for other arguments", listAudit(t, h, core.AuditFilter{}), []core.AuditEntry{want})

	// An entry's own time and outcome are kept.
	own := core.AuditEntry{At: at(4 * time.Minute), Principal: "timer", Route: "timer", Action: core.AuditDeny,
		Target: b.ID, Outcome: "expired"}
	o := own
	if _, err := h.Store.DecideApproval(ctx, b.ID, core.Decision{
		Status: core.ApprovalExpired, Via: "timer", At: at(5 * time.Minute), Audit: &o,
	}); err != nil {
		t.Fatalf("DecideApproval(expired): %v", err)
	}
	if stored := getApproval(t, h, b.ID); stored.DecidedByName != "" {
		t.Errorf("decided_by_name of a decision without a name = %q, want empty", stored.DecidedByName)
	}
	wantAudit(t, "audit after the expiry", listAudit(t, h, core.AuditFilter{}), []core.AuditEntry{own, want})

	// A decision without an entry writes none.
	_, c := pausedRun(t, h, at(time.Hour))
	decide(t, h, c.ID, core.ApprovalDenied, "u-boss")
	if n := len(listAudit(t, h, core.AuditFilter{})); n != 2 {
		t.Errorf("audit has %d entries after a decision without one, want 2", n)
	}
}

func testCancelRunAudit(t *testing.T, h Harness) {
	ctx := t.Context()
	r, a := pausedRun(t, h, at(time.Hour))
	entry := core.AuditEntry{Principal: "key:ops", Route: "api", Action: core.AuditCancel, Target: r.ID, Detail: "stuck"}
	e := entry
	if _, err := h.Store.CancelRun(ctx, r.ID, core.Cancel{By: "key:ops", Reason: "stuck", At: at(5 * time.Minute), Audit: &e}); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	if ap := getApproval(t, h, a.ID); ap.Status != core.ApprovalCancelled || ap.DecidedBy != "key:ops" {
		t.Errorf("approval of the cancelled run = %+v, want cancelled by key:ops", ap)
	}
	want := entry
	want.At, want.Outcome = at(5*time.Minute), core.AuditOK
	wantAudit(t, "audit after the cancel", listAudit(t, h, core.AuditFilter{}), []core.AuditEntry{want})

	again := entry
	_, err := h.Store.CancelRun(ctx, r.ID, core.Cancel{By: "key:ops", At: at(6 * time.Minute), Audit: &again})
	wantErr(t, "second CancelRun", err, core.ErrRunFinished)
	wantAudit(t, "audit after a refused cancel", listAudit(t, h, core.AuditFilter{}), []core.AuditEntry{want})

	// A run finished by the dead-letter path cancels its approval without an entry.
	r2, a2 := pausedRun(t, h, at(time.Hour))
	if _, err := h.Store.FinishRun(ctx, r2.ID, "", core.Finish{Status: core.RunFailed, Error: "dead", At: at(7 * time.Minute)}); err != nil {
		t.Fatalf("FinishRun: %v", err)
	}
	if ap := getApproval(t, h, a2.ID); ap.Status != core.ApprovalCancelled || ap.DecidedByName != "" {
		t.Errorf("approval of the failed run = %+v, want cancelled without a name", ap)
	}
	if n := len(listAudit(t, h, core.AuditFilter{})); n != 1 {
		t.Errorf("audit has %d entries after FinishRun, want 1", n)
	}
}

func testAuditList(t *testing.T, h Harness) {
	ctx := t.Context()
	empty, err := h.Store.ListAudit(ctx, core.AuditFilter{})
	if err != nil || len(empty.Items) != 0 || empty.NextCursor != "" {
		t.Errorf("ListAudit of an empty store = %+v, %v; want no items and no cursor", empty, err)
	}

	entries := []core.AuditEntry{
		{Principal: "key:ci", Route: "api", Action: core.AuditTrigger, Target: "digest", Outcome: core.AuditOK},
		{Principal: "slack:T1/U1", Route: "slack", Action: core.AuditApprove, Target: "apr_1", Outcome: core.AuditOK},
		{Principal: "key:ci", Route: "cli", Action: core.AuditCancel, Target: "run_1", Outcome: core.AuditOK},
		{Principal: "", Route: "api", Action: core.AuditKeyRefused, Outcome: core.AuditDenied, Detail: "unknown key"},
		{Principal: "slack:T1/U1", Route: "slack", Action: core.AuditDeny, Target: "apr_2", Outcome: core.AuditOK},
		{Principal: "key:ops", Route: "mcp", Action: core.AuditTrigger, Target: "digest", Outcome: core.AuditDenied, Detail: "role viewer"},
		{Principal: "key:ci", Route: "api", Action: core.AuditApprove, Target: "apr_3", Outcome: core.AuditOK},
	}
	for i := range entries {
		entries[i].At = at(time.Duration(i) * time.Minute)
		if entries[i].Detail == "" {
			entries[i].Detail = fmt.Sprint("entry ", i)
		}
		if err := h.Store.AppendAudit(ctx, entries[i]); err != nil {
			t.Fatalf("AppendAudit(%d): %v", i, err)
		}
	}
	// pick returns entries[is...], in the order given.
	pick := func(is ...int) []core.AuditEntry {
		out := make([]core.AuditEntry, len(is))
		for i, j := range is {
			out[i] = entries[j]
		}
		return out
	}
	tests := []struct {
		name string
		f    core.AuditFilter
		want []core.AuditEntry
	}{
		{"all, newest first", core.AuditFilter{}, pick(6, 5, 4, 3, 2, 1, 0)},
		{"principal", core.AuditFilter{Principal: "key:ci"}, pick(6, 2, 0)},
		{"action", core.AuditFilter{Action: core.AuditApprove}, pick(6, 1)},
		{"target", core.AuditFilter{Target: "digest"}, pick(5, 0)},
		{"route", core.AuditFilter{Route: "slack"}, pick(4, 1)},
		{"since", core.AuditFilter{Since: at(4 * time.Minute)}, pick(6, 5, 4)},
		{"since, between entries", core.AuditFilter{Since: at(4*time.Minute + time.Second)}, pick(6, 5)},
		{"principal and route", core.AuditFilter{Principal: "key:ci", Route: "api"}, pick(6, 0)},
		{"action and since", core.AuditFilter{Action: core.AuditTrigger, Since: at(time.Minute)}, pick(5)},
		{"no match", core.AuditFilter{Principal: "key:nobody"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantAudit(t, fmt.Sprintf("ListAudit(%+v)", tc.f), listAudit(t, h, tc.f), tc.want)
		})
	}

	detail := func(e core.AuditEntry) string { return e.Detail }
	details := func(es []core.AuditEntry) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.Detail
		}
		return out
	}
	pages := []struct {
		name      string
		f         core.AuditFilter
		limit     int
		want      []core.AuditEntry
		wantSizes []int
	}{
		{"all", core.AuditFilter{}, 3, pick(6, 5, 4, 3, 2, 1, 0), []int{3, 3, 1}},
		{"all, pages that end with the list", core.AuditFilter{}, 7, pick(6, 5, 4, 3, 2, 1, 0), []int{7}},
		{"principal", core.AuditFilter{Principal: "key:ci"}, 2, pick(6, 2, 0), []int{2, 1}},
		{"since", core.AuditFilter{Since: at(3 * time.Minute)}, 2, pick(6, 5, 4, 3), []int{2, 2}},
	}
	for _, tc := range pages {
		t.Run("pages of "+tc.name, func(t *testing.T) {
			ids, sizes := pageAll(t, "ListAudit", func(c string) (core.Page[core.AuditEntry], error) {
				f := tc.f
				f.ListOptions = core.ListOptions{Limit: tc.limit, Cursor: c}
				return h.Store.ListAudit(ctx, f)
			}, detail)
			if want := details(tc.want); !slices.Equal(ids, want) {
				t.Errorf("entries = %v, want %v (newest first, no gap or repeat)", ids, want)
			}
			if !slices.Equal(sizes, tc.wantSizes) {
				t.Errorf("page sizes = %v, want %v (the last page has no next cursor)", sizes, tc.wantSizes)
			}
		})
	}

	for _, c := range []string{"not-a-cursor", "-1", "1.5"} {
		_, err := h.Store.ListAudit(ctx, core.AuditFilter{ListOptions: core.ListOptions{Cursor: c}})
		wantErr(t, fmt.Sprintf("ListAudit with cursor %q", c), err, core.ErrInvalidCursor)
	}

	// An entry without a time or outcome gets now and ok; an id passed in
	// is ignored: appending never changes an earlier entry.
	all := listAudit(t, h, core.AuditFilter{})
	oldest := all[len(all)-1]
	before := time.Now().Add(-time.Second)
	if err := h.Store.AppendAudit(ctx, core.AuditEntry{ID: oldest.ID, Principal: "key:ci", Route: "api",
		Action: core.AuditRoutineDelete, Target: "digest"}); err != nil {
		t.Fatalf("AppendAudit without a time: %v", err)
	}
	after := time.Now().Add(time.Second)
	all = listAudit(t, h, core.AuditFilter{})
	if len(all) != len(entries)+1 {
		t.Fatalf("ListAudit after another append: %d entries, want %d", len(all), len(entries)+1)
	}
	newest := all[0]
	if newest.Action != core.AuditRoutineDelete || newest.Outcome != core.AuditOK || newest.ID == oldest.ID {
		t.Errorf("newest entry = %+v, want the routine.delete with outcome ok and a new id", newest)
	}
	if newest.At.Before(before) || newest.At.After(after) {
		t.Errorf("entry appended without a time: at %v, want now (%v..%v)", newest.At, before, after)
	}
	wantAudit(t, "the earlier entries", all[1:], pick(6, 5, 4, 3, 2, 1, 0))
}
