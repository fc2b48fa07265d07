package core_test

import (
	"bytes"
	"context"
	"encoding/json"
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
