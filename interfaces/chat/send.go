package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Sent says what Sender.PostOnce did.
type Sent struct {
	Posted bool   // this call posted the message
	State  string // the outbox state after the call
	Ref    string // the platform's ref of the message, when known
}

// Sender posts messages through the outbox: the intent is recorded before
// the platform call and the message's ref after it, so a retried job never
// posts a message twice. A message whose earlier outcome is unknown is not
// posted again (it is marked uncertain and logged): a missing message is
// better than a doubled one.
type Sender struct {
	Outbox   core.Outbox // required
	Clock    core.Clock  // required
	Logger   *slog.Logger
	Platform string // names the platform in logs and outbox keys
	// Uncertain is the platform's error of a post that may have posted the
	// message all the same (its answer was lost); other errors are
	// refusals: nothing was posted and the key can be claimed again.
	Uncertain error
}

// MaybePosted reports whether err is (or wraps) s.Uncertain (chat.Platform).
func (s Sender) MaybePosted(err error) bool { return s.Uncertain != nil && errors.Is(err, s.Uncertain) }

// LiveKey names the outbox entry of the live message of segment seg of
// run runID (chat.Platform). Segment n is the run after its n-th pause for
// an approval, shown in a message of its own (below the card).
func (s Sender) LiveKey(runID string, seg int) string {
	return s.Platform + ":live:" + runID + ":" + strconv.Itoa(seg)
}

// Poster is a platform's API client with the outbox's post-once for it.
type Poster[C any] struct {
	Sender
	Client C
}

// NewPoster returns the Poster of platform: posts recorded in outbox,
// maybePosted the platform's error of a post that may have gone through.
func NewPoster[C any](platform string, outbox core.Outbox, client C, clock core.Clock, log *slog.Logger, maybePosted error) Poster[C] {
	return Poster[C]{Client: client, Sender: Sender{Outbox: outbox, Clock: clock, Logger: log, Platform: platform,
		Uncertain: maybePosted}}
}

// Now is the clock's time in UTC.
func (s Sender) Now() time.Time { return s.Clock.Now().UTC() }

// PostOnce calls post for the message named key unless an earlier attempt
// did or may have. A refusal is returned as an error.
func (s Sender) PostOnce(ctx context.Context, key string, post func(context.Context) (ref string, err error)) (Sent, error) {
	at := s.Now()
	claimed, state, err := s.Outbox.ClaimSend(ctx, key, at)
	if err != nil {
		// The claim may have been recorded, its answer lost: nothing was
		// posted, so give it back, or the next attempt takes it for a post
		// whose outcome is unknown and never posts.
		if rerr := Record(ctx, func(ctx context.Context) error { return s.Outbox.ReleaseSend(ctx, key, at) }); rerr != nil {
			s.log().Warn(s.Platform+" message claim not given back; a later attempt will not post it", "key", key, "err", rerr)
		}
		return Sent{}, err
	}
	if !claimed {
		if state == core.SendSending {
			s.log().Warn(s.Platform+" message outcome unknown after an earlier attempt; not posting it again", "key", key)
			return Sent{State: core.SendUncertain}, s.setState(ctx, key, core.SendUncertain, "")
		}
		res := Sent{State: state}
		if state == core.SendSent {
			_, res.Ref, err = s.Outbox.SendRef(ctx, key)
		}
		return res, err
	}
	ref, err := post(ctx)
	switch {
	case err != nil && s.MaybePosted(err):
		s.log().Warn(s.Platform+" message may have been posted; not posting it again", "key", key, "err", err)
		return Sent{State: core.SendUncertain}, s.setState(ctx, key, core.SendUncertain, "")
	case err != nil:
		if serr := s.setState(ctx, key, core.SendFailed, ""); serr != nil {
			return Sent{}, errors.Join(err, serr)
		}
		return Sent{State: core.SendFailed}, err
	}
	return Sent{Posted: true, State: core.SendSent, Ref: ref}, s.setState(ctx, key, core.SendSent, ref)
}

// setState records the outcome of a platform call (recordState).
func (s Sender) setState(ctx context.Context, key, state, ref string) error {
	return recordState(ctx, s.Outbox, key, state, ref, s.Now())
}

// recordState sets the outbox state of the message named key even when
// ctx has ended: as Record does, but for SendFailed, written once: that
// claims the entry back for a later attempt, whose outcome a late retry
// of it would overwrite.
func recordState(ctx context.Context, ob core.Outbox, key, state, ref string, at time.Time) error {
	write := func(ctx context.Context) error { return ob.SetSendState(ctx, key, state, ref, at) }
	if state == core.SendFailed {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		return write(wctx)
	}
	return Record(ctx, write)
}

// recordTimeout bounds one write of Record.
const recordTimeout = 2 * time.Second

// Record writes what a platform call left to know, even when ctx has ended
// meanwhile (the job stopping), trying three times over about a second
// after a store blip: an outcome not written is one the next attempt
// cannot know (a card's ref, which its clicks are checked against; a live
// message to go on editing).
func Record(ctx context.Context, write func(context.Context) error) error {
	var err error
	for i, pause := range []time.Duration{0, 200 * time.Millisecond, 800 * time.Millisecond} {
		if i > 0 {
			time.Sleep(pause)
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		err = write(wctx)
		cancel()
		if err == nil || errors.Is(err, core.ErrNotFound) {
			return err
		}
	}
	return err
}

func (s Sender) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// Uploads is how a platform takes a run's files (Sender.Upload).
type Uploads struct {
	// File uploads one file where the answer went.
	File func(ctx context.Context, f core.File) (ref string, err error)
	// Max is the largest file the platform takes, 0 = none of its own; a
	// larger file is named in a note (Note posts text where the answer
	// went) instead of refused at every attempt.
	Max  int64
	Note func(ctx context.Context, text string) (ref string, err error)
}

// Upload uploads files through the outbox, each once, under key:file:i:
// the files a run's tools returned, below its answer. An empty file is
// left out (platforms refuse them). A file that fails does not hold back
// the ones after it: the error, returned once all were tried, retries the
// job, which skips what was sent.
func (s Sender) Upload(ctx context.Context, key string, files []core.File, u Uploads) error {
	var errs []error
	for i, f := range files {
		post := func(ctx context.Context) (string, error) { return u.File(ctx, f) }
		switch size := int64(len(f.Data)); {
		case size == 0:
			s.log().Warn(s.Platform+" file is empty; not uploaded", "key", key, "file", f.Name)
			continue
		case u.Max > 0 && size > u.Max:
			text := fmt.Sprintf("📎 %s (%s) was not uploaded: files here may be at most %s.", f.Name, core.ByteSize(size), core.ByteSize(u.Max))
			post = func(ctx context.Context) (string, error) { return u.Note(ctx, text) }
		}
		if _, err := s.PostOnce(ctx, key+":file:"+strconv.Itoa(i), post); err != nil {
			errs = append(errs, fmt.Errorf("upload %s: %w", f.Name, err))
		}
	}
	return errors.Join(errs...)
}
