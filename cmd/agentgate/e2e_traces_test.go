package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentgate/agentgate/core/tracing"
)

// otlpReceiver is an OTLP/HTTP trace receiver (POST /v1/traces,
// application/x-protobuf), as a collector serves it.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want POST /v1/traces, application/x-protobuf", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(req.Body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) Spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

func spanNames(spans []*tracepb.Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "%q trace %x parent %x; ", s.Name, s.TraceId, s.ParentSpanId)
	}
	return b.String()
}

// One approved run, asked for and approved in Telegram, sends its spans to
// the OTLP receiver OTEL_EXPORTER_OTLP_ENDPOINT names, all on one trace:
// the run, both model calls, the tool call, the approval wait and the chat
// posts (the card, its edit to the outcome, the answer) — though the
// gateway restarts between the card and the click. Its log lines carry the
// trace id.
func TestTracesOfAnApprovedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	recv := newOTLPReceiver(t)
	fake, tool, g := startTelegramGateway(t, "TELEGRAM_WEBHOOK_SECRET="+tgSecret,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+recv.URL, "OTEL_BSP_SCHEDULE_DELAY=50")
	g.telegramPost(tgSecret, tgMention(910001, 411, tgBob, "deploy web to staging"))
	card, approve := tgCard(t, fake)
	// Bob's click is refused once the card's id is recorded (a kill before
	// that leaves the card's outcome unknown and its buttons refused).
	g.telegramPost(tgSecret, tgClick(910003, "q-bob-traces", tgBob, card, approve))
	eventually(t, "the refusal", func() (bool, string) {
		a, ok := fake.Answer("q-bob-traces")
		return ok && strings.Contains(a, "may not decide"), a
	})
	// The spans of one trace come from two processes: the first one's are
	// sent before it is killed (a kill loses what is still batched).
	eventually(t, "the first process's spans", func() (bool, string) {
		n := 0
		for _, s := range recv.Spans() {
			if s.Name == tracing.SpanModelCall || s.Name == tracing.SpanChatPost {
				n++
			}
		}
		return n == 2, spanNames(recv.Spans())
	})
	g.kill()
	g.start()
	g.telegramPost(tgSecret, tgClick(910002, "q-ana-traces", tgAna, card, approve))

	var runs []*tracepb.Span
	eventually(t, "the run span", func() (bool, string) {
		runs = nil
		for _, s := range recv.Spans() {
			if s.Name == tracing.SpanRun {
				runs = append(runs, s)
			}
		}
		return len(runs) == 1, spanNames(recv.Spans())
	})
	root := runs[0]
	var runID string
	for _, a := range root.Attributes {
		if a.Key == tracing.AttrRun {
			runID = a.Value.GetStringValue()
		}
	}
	wantTrace, wantSpan := tracing.IDs(runID)
	if runID == "" || hex.EncodeToString(root.TraceId) != wantTrace.String() || hex.EncodeToString(root.SpanId) != wantSpan.String() {
		t.Fatalf("run span of %q: trace %x span %x, want the ids its run id derives", runID, root.TraceId, root.SpanId)
	}
	want := map[string]int{tracing.SpanModelCall: 2, tracing.SpanToolCall: 1, tracing.SpanApprovalWait: 1, tracing.SpanChatPost: 3}
	eventually(t, "every span of the run", func() (bool, string) {
		got := map[string]int{}
		for _, s := range recv.Spans() {
			if s.Name != tracing.SpanRun && slices.Equal(s.TraceId, root.TraceId) && slices.Equal(s.ParentSpanId, root.SpanId) {
				got[s.Name]++
			}
		}
		for name, n := range want {
			if got[name] < n {
				return false, spanNames(recv.Spans())
			}
		}
		return true, ""
	})
	for _, s := range recv.Spans() {
		if !slices.Equal(s.TraceId, root.TraceId) {
			t.Errorf("span %q on trace %x, want every span on the run's %x", s.Name, s.TraceId, root.TraceId)
		}
	}
	if n := len(tool.Requests()); n != 1 {
		t.Errorf("tool called %d times, want 1", n)
	}
	if out := g.out.String(); !strings.Contains(out, "run="+runID) || !strings.Contains(out, "trace_id="+wantTrace.String()) {
		t.Errorf("no log line of run %s carries trace_id=%s:\n%s", runID, wantTrace, out)
	}
}
