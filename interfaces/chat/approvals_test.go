package chat_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// fakeCards is a platform that posts approval cards through its outbox,
// once, and records "post <approval> <status>" and "edit <ref> <status>".
// post, when set, is called in place of the platform's API.
type fakeCards struct {
	chat.Poster[struct{}]
	mu    sync.Mutex
	calls []string
	post  func(ctx context.Context, a core.Approval) (string, error)
}

func (f *fakeCards) add(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeCards) PostCard(ctx context.Context, key string, _ core.Binding, a core.Approval, _ core.Run) (chat.Sent, error) {
	return f.PostOnce(ctx, key, func(ctx context.Context) (string, error) {
		f.add("post " + a.ID + " " + string(a.Status))
		if f.post != nil {
			return f.post(ctx, a)
		}
		return "m-" + a.ID, nil
	})
}

func (f *fakeCards) EditCard(_ context.Context, ref string, _ core.Binding, a core.Approval, _ core.Run) error {
	f.add("edit " + ref + " " + string(a.Status))
	return nil
}

func (f *fakeCards) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

// cardRig is the approval router over SQLite with one fake platform.
type cardRig struct {
	t      *testing.T
	x      *pipe
	cards  *fakeCards
	router *chat.Approvals
}

func newCardRig(t *testing.T) *cardRig {
	x := newPipe(t)
	cards := &fakeCards{Poster: chat.NewPoster(chat.PlatformSlack, x.db, struct{}{}, core.SystemClock{}, nil, errMaybe)}
	return &cardRig{t: t, x: x, cards: cards,
		router: &chat.Approvals{Store: x.db, Renderers: map[string]chat.ApprovalRenderer{chat.PlatformSlack: cards}}}
}

// pause starts a chat run and pauses it for a new approval.
func (c *cardRig) pause() core.Approval {
	c.t.Helper()
	ctx := c.t.Context()
	run := c.x.run(chat.PlatformSlack)
	now := time.Now()
	if _, err := c.x.db.ClaimRun(ctx, run.ID, "w1", now, now.Add(time.Minute), nil); err != nil {
		c.t.Fatal(err)
	}
	a := core.Approval{ID: core.NewID("apr"), ToolCallID: "call1", Tool: "deploy", Arguments: json.RawMessage(`{"env":"prod"}`),
		RequestedBy: "u1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	ev := core.NewEvent(core.EventApprovalRequested, core.ApprovalRequested{ApprovalID: a.ID, ToolCallID: a.ToolCallID,
		Tool: a.Tool, Arguments: a.Arguments, ExpiresAt: a.ExpiresAt})
	if _, err := c.x.db.PauseRun(ctx, run.ID, "w1", a, []core.Event{ev}); err != nil {
		c.t.Fatal(err)
	}
	return a
}

func (c *cardRig) decide(ctx context.Context, a core.Approval) {
	c.t.Helper()
	if _, err := c.x.db.DecideApproval(ctx, a.ID, core.Decision{Status: core.ApprovalApproved, By: "u-boss", Via: "api", At: time.Now()}); err != nil {
		c.t.Error(err)
	}
}

// job runs the approval job of a, as the engine's workers do after every
// change of a.
func (c *cardRig) job(a core.Approval) {
	c.t.Helper()
	payload, _ := json.Marshal(core.ApprovalJob{ApprovalID: a.ID})
	if err := c.router.Handle(c.t.Context(), core.Job{ID: core.NewID("job"), Kind: core.JobApproval, Payload: payload}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cardRig) want(when string, calls ...string) {
	c.t.Helper()
	if got := c.cards.took(); !slices.Equal(got, calls) {
		c.t.Errorf("%s: calls = %q, want %q", when, got, calls)
	}
}

// TestApprovalCardOnce: the router posts an approval's card once however
// often its jobs run, edits it to the outcome, and never posts a second
// card: not after a post whose outcome is unknown, not after a crash in the
// middle of one. A decision made while the card was being posted is shown.
func TestApprovalCardOnce(t *testing.T) {
	t.Parallel()
	c := newCardRig(t)

	a := c.pause()
	c.job(a)
	c.job(a) // a retried job
	c.want("pending, twice", "post "+a.ID+" pending")
	c.decide(t.Context(), a)
	c.job(a)
	c.want("approved", "edit m-"+a.ID+" approved")

	// Decided while the post was in flight: the decision's job found the
	// card being posted and left it alone; the post shows the outcome.
	b := c.pause()
	c.cards.post = func(ctx context.Context, a core.Approval) (string, error) {
		c.decide(ctx, a)
		c.job(a)
		return "m-" + a.ID, nil
	}
	c.job(b)
	c.cards.post = nil
	c.want("decided during the post", "post "+b.ID+" pending", "edit m-"+b.ID+" approved")

	// The platform's answer was lost: no card, then or on a retry.
	d := c.pause()
	c.cards.post = func(context.Context, core.Approval) (string, error) { return "", errMaybe }
	c.job(d)
	c.cards.post = nil
	c.job(d)
	c.want("answer lost", "post "+d.ID+" pending")

	// A worker died after claiming the post: the retry posts nothing and
	// marks the card uncertain.
	e := c.pause()
	key := core.CardKey(chat.PlatformSlack, e.ID)
	if claimed, _, err := c.x.db.ClaimSend(t.Context(), key, time.Now()); err != nil || !claimed {
		t.Fatalf("ClaimSend = %v, %v", claimed, err)
	}
	c.job(e)
	c.want("crashed mid-post")
	if state, _, err := c.x.db.SendRef(t.Context(), key); err != nil || state != core.SendUncertain {
		t.Errorf("card state after the crashed post = %q, %v; want %q", state, err, core.SendUncertain)
	}
}

// A card names the MCP server whose tool asks (the same name may be the
// agent's own tool, or another server's, on another day).
func TestCardNamesTheMCPServer(t *testing.T) {
	run := core.Run{ID: "run_1", AgentID: "ops"}
	for origin, want := range map[string]string{"mcp:github": "github", "agent": "", "": ""} {
		c := chat.Card(core.Approval{ID: "apr_1", Tool: "create_or_update_file", Origin: origin}, run, nil)
		if c.Server != want {
			t.Errorf("origin %q: card's server %q, want %q", origin, c.Server, want)
		}
	}
}
