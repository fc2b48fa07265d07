package otlp

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentgate/agentgate/core/tracing"
)

// The spans of one run, whichever process sends them, are on the trace its
// id derives, under the run span that has the derived span id.
func TestRunSpansShareOneTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(newIDs()))
	otel.SetTracerProvider(tp)
	tracing.Enable()

	const run = "run_0123456789abcdef"
	created := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	_, span := tracing.Start(context.Background(), run, tracing.SpanModelCall)
	tracing.End(span, nil)
	_, span = tracing.Start(context.Background(), run, tracing.SpanToolCall)
	tracing.End(span, errors.New("tool down"))
	tracing.Past(run, tracing.SpanApprovalWait, created.Add(time.Second), created.Add(time.Minute), "")
	tracing.Finished(run, "ops", "completed", "", created, created.Add(2*time.Minute))
	_, other := tracing.Start(context.Background(), "run_other", tracing.SpanModelCall)
	tracing.End(other, nil)

	wantTrace, wantRoot := tracing.IDs(run)
	spans := exp.GetSpans()
	if len(spans) != 5 {
		t.Fatalf("%d spans, want 5", len(spans))
	}
	for _, s := range spans[:4] {
		if s.SpanContext.TraceID() != wantTrace {
			t.Errorf("%s on trace %s, want %s", s.Name, s.SpanContext.TraceID(), wantTrace)
		}
	}
	for _, s := range spans[:3] {
		if s.Parent.SpanID() != wantRoot {
			t.Errorf("%s's parent = %s, want the run span %s", s.Name, s.Parent.SpanID(), wantRoot)
		}
	}
	root := spans[3]
	if root.Name != tracing.SpanRun || root.SpanContext.SpanID() != wantRoot || root.Parent.IsValid() ||
		!root.StartTime.Equal(created) || !root.EndTime.Equal(created.Add(2*time.Minute)) {
		t.Errorf("run span = %s %s parent %v %s → %s", root.Name, root.SpanContext.SpanID(), root.Parent.IsValid(), root.StartTime, root.EndTime)
	}
	if spans[1].Status.Description != "tool down" {
		t.Errorf("failed tool call status = %+v", spans[1].Status)
	}
	if o := spans[4]; o.SpanContext.TraceID() == wantTrace {
		t.Error("another run's span is on this run's trace")
	}

	// A log line naming the run carries its trace id.
	var buf bytes.Buffer
	slog.New(tracing.Logs(slog.NewTextHandler(&buf, nil))).Info("run finished", "run", run)
	if !strings.Contains(buf.String(), "trace_id="+wantTrace.String()) {
		t.Errorf("log line %q has no trace_id=%s", buf.String(), wantTrace)
	}
}

// Bad OTLP settings are refused at start with what to write instead.
func TestExporterSettings(t *testing.T) {
	for _, tc := range []struct{ env, value, want string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318", "not an http:// or https:// URL"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "api-key", "want key=value pairs"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT", "10s", "want milliseconds"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
			t.Setenv(tc.env, tc.value)
			if _, err := newExporter(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s=%s: err = %v, want %q", tc.env, tc.value, err, tc.want)
			}
		})
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector.example:4318/")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s%3Dcret, x-team=ops")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2500")
	e, err := newExporter()
	if err != nil {
		t.Fatal(err)
	}
	if e.url != "https://collector.example:4318/v1/traces" || e.headers.Get("Api-Key") != "s=cret" ||
		e.headers.Get("X-Team") != "ops" || e.client.Timeout != 2500*time.Millisecond {
		t.Errorf("exporter = %s %v %s", e.url, e.headers, e.client.Timeout)
	}
}

// A receiver that is busy once gets the batch on the next try.
func TestExporterRetriesBusyReceiver(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL+"/v1/traces")
	e, err := newExporter()
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	_, s := tp.Tracer("t").Start(context.Background(), "x")
	s.End()
	if err := e.ExportSpans(context.Background(), exp.GetSpans().Snapshots()); err != nil || calls.Load() != 2 {
		t.Errorf("export = %v after %d calls, want nil after 2", err, calls.Load())
	}
}
