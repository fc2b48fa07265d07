package chat_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/store/sqlite"
)

func TestSenderPostsOnce(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	lost, refused := errors.New("answer lost"), errors.New("refused")
	s := chat.Sender{Outbox: db, Clock: core.SystemClock{}, Platform: "test", Uncertain: lost}
	posts := 0
	post := func(err error) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			posts++
			if err != nil {
				return "", err
			}
			return "m1", nil
		}
	}
	steps := []struct {
		key    string
		err    error
		posted bool
		state  string
		ref    string
	}{
		{"a", nil, true, core.SendSent, "m1"},
		{"a", nil, false, core.SendSent, "m1"},     // done: not again, the ref kept
		{"b", lost, false, core.SendUncertain, ""}, // may have been posted
		{"b", nil, false, core.SendUncertain, ""},  // so never again
		{"c", refused, false, core.SendFailed, ""}, // nothing was posted
		{"c", nil, true, core.SendSent, "m1"},      // so it is tried again
	}
	for i, st := range steps {
		res, err := s.PostOnce(t.Context(), st.key, post(st.err))
		if st.err == refused && !errors.Is(err, refused) || st.err != refused && err != nil {
			t.Fatalf("step %d: err %v", i, err)
		}
		if res.Posted != st.posted || res.State != st.state || res.Ref != st.ref {
			t.Errorf("step %d (%s): %+v, want posted %v, %s, ref %q", i, st.key, res, st.posted, st.state, st.ref)
		}
	}
	if posts != 4 {
		t.Errorf("%d posts, want 4", posts)
	}
}

// lossyOutbox is the store's outbox, except that its first ClaimSend is
// recorded and then answers an error (a connection lost at COMMIT), or its
// first SetSendState(sent) fails (a blip right after the platform call).
type lossyOutbox struct {
	core.Outbox
	claimLost, sentLost bool
}

func (o *lossyOutbox) ClaimSend(ctx context.Context, key string, at time.Time) (bool, string, error) {
	ok, state, err := o.Outbox.ClaimSend(ctx, key, at)
	if o.claimLost {
		o.claimLost = false
		return false, "", errors.New("claim send " + key + ": conn closed")
	}
	return ok, state, err
}

func (o *lossyOutbox) SetSendState(ctx context.Context, key, state, ref string, at time.Time) error {
	if o.sentLost && state == core.SendSent {
		o.sentLost = false
		return errors.New("set send state: conn closed")
	}
	return o.Outbox.SetSendState(ctx, key, state, ref, at)
}

// A store answer lost around a post loses neither the message nor its
// ref: a claim recorded though ClaimSend failed is given back (else the
// retry took it for a post of unknown outcome and never posted), and a
// sent outcome whose first write failed is written (else a card's clicks,
// checked against its ref, were all refused).
func TestSenderSurvivesLostStoreAnswers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		ob   func(core.Outbox) *lossyOutbox
	}{
		{"claim answer lost", func(o core.Outbox) *lossyOutbox { return &lossyOutbox{Outbox: o, claimLost: true} }},
		{"sent state lost", func(o core.Outbox) *lossyOutbox { return &lossyOutbox{Outbox: o, sentLost: true} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t)
			s := chat.Sender{Outbox: tt.ob(db), Clock: core.SystemClock{}, Platform: "slack"}
			posts := 0
			post := func(context.Context) (string, error) { posts++; return "1700000000.000100", nil }
			key := core.CardKey("slack", "apr_1")
			for attempt := 1; attempt <= 3; attempt++ { // the job and its retries
				if _, err := s.PostOnce(t.Context(), key, post); err == nil {
					break
				}
			}
			state, ref, err := db.SendRef(t.Context(), key)
			if posts != 1 || err != nil || state != core.SendSent || ref != "1700000000.000100" {
				t.Errorf("posted %d times, outbox %q %q %v; want once, sent with its ref", posts, state, ref, err)
			}
		})
	}
}

// A notifier without its outbox or its client is refused at start, naming
// the platform; with both, its posts go through the outbox.
func TestNotifierConfigPoster(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	type client struct{ posts int }
	for _, cfg := range []chat.NotifierConfig[*client]{{Client: &client{}}, {Outbox: db}} {
		if _, err := cfg.Poster("matrix", nil); err == nil || !strings.Contains(err.Error(), "matrix: the notifier needs an outbox and a client") {
			t.Errorf("Poster(%+v) = %v, want the notifier refused", cfg, err)
		}
	}
	p, err := chat.NotifierConfig[*client]{Outbox: db, Client: &client{}}.Poster("matrix", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := p.PostOnce(t.Context(), "k", func(context.Context) (string, error) { p.Client.posts++; return "m1", nil }); err != nil {
			t.Fatal(err)
		}
	}
	if state, ref, err := db.SendRef(t.Context(), "k"); err != nil || state != core.SendSent || ref != "m1" || p.Client.posts != 1 {
		t.Errorf("outbox %q %q %v after %d posts, want sent m1 after one", state, ref, err, p.Client.posts)
	}
}

// openDB opens an embedded store in the test's temporary directory, closed
// when the test ends.
func openDB(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Upload tries every file: an empty one is left out, one over the
// platform's limit becomes a note, and one that fails holds back none
// after it; the retry (the error retries the job) sends the failed one and
// nothing twice.
func TestUploadTriesEveryFile(t *testing.T) {
	db := openDB(t)
	s := chat.Sender{Outbox: db, Clock: core.SystemClock{}, Platform: "test"}
	file := func(name string, size int) core.File {
		return core.File{Attachment: core.Attachment{Name: name}, Data: make([]byte, size)}
	}
	files := []core.File{file("a.png", 10), file("empty.txt", 0), file("video.mp4", 200), file("flaky.pdf", 10), file("e.csv", 10)}
	var sent []string
	failed := false
	u := chat.Uploads{
		File: func(_ context.Context, f core.File) (string, error) {
			if f.Name == "flaky.pdf" && !failed {
				failed = true
				return "", errors.New("500 internal error")
			}
			sent = append(sent, f.Name)
			return "", nil
		},
		Max:  100,
		Note: func(_ context.Context, text string) (string, error) { sent = append(sent, text); return "", nil },
	}
	if err := s.Upload(t.Context(), "test:reply:run_1", files, u); err == nil || !strings.Contains(err.Error(), "flaky.pdf") {
		t.Errorf("first attempt: %v, want flaky.pdf's error", err)
	}
	if err := s.Upload(t.Context(), "test:reply:run_1", files, u); err != nil {
		t.Errorf("retry: %v", err)
	}
	want := []string{"a.png", "📎 video.mp4 (200 B) was not uploaded: files here may be at most 100 B.", "e.csv", "flaky.pdf"}
	if !slices.Equal(sent, want) {
		t.Errorf("sent %q, want %q", sent, want)
	}
}
