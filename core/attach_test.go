package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/blobdir"
	"github.com/agentgate/agentgate/store/sqlite"
)

// TestAttachmentsReachTheModel: an attached image is given to a model that
// takes images, with its bytes; other files, and images for a model that
// does not take them, are described in the message's text; a message may
// be attachments alone.
func TestAttachmentsReachTheModel(t *testing.T) {
	t.Parallel()
	ok := func(int, core.ModelRequest) (core.ModelResponse, error) { return core.ModelResponse{Text: "seen"}, nil }
	seeing, blind := &scriptModel{Func: ok}, &scriptModel{Func: ok}
	var blobs core.Blobs
	h := newHarness(t, map[string]*core.Agent{
		"seeing": {Model: seeing, Images: true},
		"blind":  {Model: blind},
	}, sqlite.Options{}, func(h *harness) {
		d, err := blobdir.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		h.blobs, blobs = d, d
	})
	png := []byte("\x89PNG\r\n\x1a\n-a-plot-")
	id, err := blobs.PutBlob(t.Context(), png)
	if err != nil {
		t.Fatal(err)
	}
	files := []core.Attachment{
		{ID: id, Name: "plot.png", MIME: "image/png", Size: int64(len(png))},
		{ID: core.BlobID([]byte("pdf")), Name: "report.pdf", MIME: "application/pdf", Size: 14_200},
		{Name: "huge.zip", MIME: "application/zip", Size: 30_000_000, Note: "not stored: larger than the 20.0 MB limit"},
	}
	for _, agent := range []string{"seeing", "blind"} {
		run, err := h.eng.Submit(t.Context(), core.SubmitRequest{AgentID: agent, UserID: "ana", Attachments: files})
		if err != nil {
			t.Fatalf("%s: a message of attachments alone: %v", agent, err)
		}
		h.waitStatus(run.ID, core.RunCompleted)
	}

	msg := seeing.requests()[0].Messages[0]
	if len(msg.Files) != 1 || msg.Files[0].Name != "plot.png" || !bytes.Equal(msg.Files[0].Data, png) {
		t.Errorf("seeing model's files = %+v, want plot.png with its bytes", msg.Files)
	}
	wantText := "[attached: report.pdf (application/pdf, 14.2 KB)]\n[attached: huge.zip (application/zip, 30.0 MB): not stored: larger than the 20.0 MB limit]"
	if msg.Content != wantText {
		t.Errorf("seeing model's text = %q, want %q", msg.Content, wantText)
	}
	msg = blind.requests()[0].Messages[0]
	if len(msg.Files) != 0 || !strings.HasPrefix(msg.Content, "[attached: plot.png (image/png, 16 B)]\n[attached: report.pdf") {
		t.Errorf("blind model's message = %q with %d files, want every file described", msg.Content, len(msg.Files))
	}
	if _, err := h.eng.Submit(t.Context(), core.SubmitRequest{AgentID: "blind", UserID: "ana"}); err == nil {
		t.Error("a message with neither text nor attachments was taken")
	}
}

// chartTool returns a chart as a file.
type chartTool struct{ png []byte }

func (c chartTool) Call(context.Context, json.RawMessage, string) (string, error) { return "", nil }

func (c chartTool) CallFiles(context.Context, json.RawMessage, string) (string, []core.File, error) {
	return "p99 latency, last hour", []core.File{{Attachment: core.Attachment{Name: "latency.png", MIME: "image/png"}, Data: c.png}}, nil
}

// TestToolFilesAreJournaled: a file a tool returns is stored, journaled
// with the result, and described to the model.
func TestToolFilesAreJournaled(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n-latency-")
	m := &scriptModel{Func: func(n int, req core.ModelRequest) (core.ModelResponse, error) {
		if n == 1 {
			return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "c1", Name: "chart", Arguments: json.RawMessage(`{}`)}}}, nil
		}
		return core.ModelResponse{Text: "Here it is."}, nil
	}}
	var blobs core.Blobs
	h := newHarness(t, map[string]*core.Agent{"ops": {Model: m, Tools: []core.AgentTool{{Spec: core.ToolSpec{Name: "chart"}, Tool: chartTool{png}}}}},
		sqlite.Options{}, func(h *harness) {
			d, err := blobdir.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			h.blobs, blobs = d, d
		})
	run := h.submit("ops", "", "show latency")
	h.waitStatus(run.ID, core.RunCompleted)
	evs, err := h.db.Events(t.Context(), run.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var res core.ToolResult
	for _, ev := range evs {
		if ev.Type == core.EventToolResult {
			_ = json.Unmarshal(ev.Data, &res)
		}
	}
	if len(res.Files) != 1 || res.Files[0].Name != "latency.png" || res.Files[0].Size != int64(len(png)) {
		t.Fatalf("journaled result = %+v, want the chart", res)
	}
	if data, err := blobs.GetBlob(t.Context(), res.Files[0].ID); err != nil || !bytes.Equal(data, png) {
		t.Errorf("stored chart: %q, %v", data, err)
	}
	if got := m.requests()[1].Messages[2].Content; got != "p99 latency, last hour\n[attached: latency.png (image/png, 17 B)]" {
		t.Errorf("the model read %q", got)
	}
}

// A file's name keeps no path, no control character (a CR/LF would reach
// an upload's multipart headers) and no more than 200 bytes.
func TestFileName(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes
	for in, want := range map[string]string{
		"report.pdf":             "report.pdf",
		"../../etc/passwd":       "passwd",
		`C:\Users\x\chart.png`:   "chart.png",
		"a\r\nX-Injected: 1.png": "aX-Injected: 1.png",
		"\u202eevil\u2028.txt":   "evil.txt",
		"..":                     "file",
		" \t ":                   "file",
		"dir/":                   "file",
		long:                     strings.Repeat("é", 100),
	} {
		if got := core.FileName(in); got != want {
			t.Errorf("FileName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A message shows a model at most core.MaxImages images, none over
// core.MaxImageBytes and core.MaxImagesBytes in all (a provider refuses
// more, and the run would fail); the rest are described, with why.
func TestImagesShownWithinLimits(t *testing.T) {
	t.Parallel()
	m := &scriptModel{Func: func(int, core.ModelRequest) (core.ModelResponse, error) { return core.ModelResponse{Text: "seen"}, nil }}
	var blobs core.Blobs
	h := newHarness(t, map[string]*core.Agent{"seeing": {Model: m, Images: true}}, sqlite.Options{}, func(h *harness) {
		d, err := blobdir.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		h.blobs, blobs = d, d
	})
	image := func(name string, size int64) core.Attachment {
		data := []byte("\x89PNG\r\n\x1a\n" + name)
		id, err := blobs.PutBlob(t.Context(), data)
		if err != nil {
			t.Fatal(err)
		}
		return core.Attachment{ID: id, Name: name, MIME: "image/png", Size: size}
	}
	for _, tc := range []struct {
		name  string
		files []core.Attachment
		shown int
		note  string
	}{
		{"one too large", []core.Attachment{image("big.png", core.MaxImageBytes+1), image("small.png", 100)}, 1,
			"[attached: big.png (image/png, 5.0 MB): not shown: larger than the 5.0 MB an image may be]"},
		{"too many", func() (fs []core.Attachment) {
			for i := range core.MaxImages + 2 {
				fs = append(fs, image(fmt.Sprintf("shot%d.png", i), 100))
			}
			return fs
		}(), core.MaxImages, "[attached: shot9.png (image/png, 100 B): not shown: a message shows at most 8 images]"},
		{"too much in all", func() (fs []core.Attachment) {
			for i := range 5 {
				fs = append(fs, image(fmt.Sprintf("scan%d.png", i), 4_900_000))
			}
			return fs
		}(), 4, "[attached: scan4.png (image/png, 4.9 MB): not shown: the message's images are over 20.0 MB in all]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(m.requests())
			run, err := h.eng.Submit(t.Context(), core.SubmitRequest{AgentID: "seeing", UserID: "ana", Attachments: tc.files})
			if err != nil {
				t.Fatal(err)
			}
			h.waitStatus(run.ID, core.RunCompleted)
			msg := m.requests()[n].Messages[0]
			if len(msg.Files) != tc.shown || !strings.Contains(msg.Content, tc.note) {
				t.Errorf("the model was shown %d images and told %q; want %d and %q", len(msg.Files), msg.Content, tc.shown, tc.note)
			}
		})
	}
}
