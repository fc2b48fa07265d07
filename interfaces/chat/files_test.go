package chat_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/store/blobdir"
)

// failingBlobs refuses every write, as a full disk does.
type failingBlobs struct{ core.Blobs }

func (failingBlobs) PutBlob(context.Context, []byte) (string, error) {
	return "", errors.New("no space left on device")
}

// Attach keeps what it stores as what it is: a file sent as an image that
// is not one is not given to a model as an image (the provider would
// refuse the request, and the run fail), and names keep no path or line
// break. The sender is told of a file over the limit once the message is
// taken, not at each attempt a failure to store retries.
func TestAttach(t *testing.T) {
	t.Parallel()
	d, err := blobdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fetch := chat.FetchRef(func(_ context.Context, ref string, _ int64) ([]byte, error) { return []byte(ref), nil })
	var told []string
	f := chat.Files{Blobs: d, Fetcher: fetch, Max: 1000, TooLarge: func(_ context.Context, text string) { told = append(told, text) }}
	in := []chat.InFile{
		{Ref: "\x89PNG\r\n\x1a\n-a-plot-", Name: "plot.png", MIME: "image/png"},
		{Ref: "just some text", Name: "../notes\r\nX: y.png", MIME: "image/png"},
		{Ref: "big", Name: "video.mp4", MIME: "video/mp4", Size: 5000},
	}
	got, err := f.Attach(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].MIME != "image/png" || !got[0].Image() || got[1].MIME != "text/plain" || got[1].Image() ||
		got[1].Name != "notesX: y.png" || got[2].ID != "" {
		t.Errorf("attached %+v; want plot.png an image, the text not, its name cleaned, the video not stored", got)
	}
	if len(told) != 1 {
		t.Errorf("the sender was told %q, want once", told)
	}

	told = nil
	f.Blobs = failingBlobs{d}
	if _, err := f.Attach(t.Context(), in); err == nil {
		t.Fatal("a failure to store was not an error")
	}
	if len(told) != 0 {
		t.Errorf("a failed attempt told the sender %q; its retry will tell them", told)
	}
}
