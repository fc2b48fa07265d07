// Package tracing puts the work on a run on one OpenTelemetry trace: the
// run (created → finished), each model call, tool call, approval wait and
// chat post. A run's trace id and the span id of its run span are derived
// from the run's id, so every process that works on the run — after a
// restart, on another replica, after an approval days later — adds its
// spans to the same trace without storing anything; the run span itself is
// sent when the run finishes.
//
// The spans go through the global TracerProvider: package otlp installs
// one when OTEL_EXPORTER_OTLP_ENDPOINT is set. Until then every function
// here does nothing.
package tracing

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Span names.
const (
	SpanRun          = "run"
	SpanModelCall    = "model call"
	SpanToolCall     = "tool call"
	SpanApprovalWait = "approval wait"
	SpanChatPost     = "chat post"
)

// AttrRun is the run id attribute every span carries.
const AttrRun = "agentgate.run.id"

var enabled atomic.Bool

// Enable turns the spans on (package otlp, once it installed a provider).
func Enable() { enabled.Store(true) }

// Enabled reports whether spans are sent.
func Enabled() bool { return enabled.Load() }

func tracer() trace.Tracer { return otel.Tracer("github.com/agentgate/agentgate") }

// IDs are run id's trace id and the span id of its run span.
func IDs(runID string) (trace.TraceID, trace.SpanID) {
	h := sha256.Sum256([]byte("agentgate run " + runID))
	var t trace.TraceID
	var s trace.SpanID
	copy(t[:], h[:16])
	copy(s[:], h[16:24])
	return t, s
}

// Run is ctx under run id's run span (a remote parent): spans started
// from it join the run's trace.
func Run(ctx context.Context, runID string) context.Context {
	t, s := IDs(runID)
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: t, SpanID: s, TraceFlags: trace.FlagsSampled, Remote: true}))
}

// Start starts span name on run id's trace; End it.
func Start(ctx context.Context, runID, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noop.Span{}
	}
	return tracer().Start(Run(ctx, runID), name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(append(attrs, attribute.String(AttrRun, runID))...))
}

// End ends span, as failed when err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Past sends span name of run id that ran from start to end (an approval
// wait), failed with errMsg when it is not empty.
func Past(runID, name string, start, end time.Time, errMsg string, attrs ...attribute.KeyValue) {
	if !Enabled() {
		return
	}
	_, span := tracer().Start(Run(context.Background(), runID), name, trace.WithTimestamp(start),
		trace.WithAttributes(append(attrs, attribute.String(AttrRun, runID))...))
	if errMsg != "" {
		span.SetStatus(codes.Error, errMsg)
	}
	span.End(trace.WithTimestamp(end))
}

type rootKey struct{}

// Root returns the ids a provider's ID generator must give the root span
// started from ctx (the run span), if ctx asks for them.
func Root(ctx context.Context) (trace.TraceID, trace.SpanID, bool) {
	id, ok := ctx.Value(rootKey{}).(string)
	if !ok {
		return trace.TraceID{}, trace.SpanID{}, false
	}
	t, s := IDs(id)
	return t, s, true
}

// Finished sends run id's run span, from created to finished, with its
// status (failed and cancelled runs are errors).
func Finished(runID, agent, status, errMsg string, created, finished time.Time) {
	if !Enabled() {
		return
	}
	ctx := context.WithValue(context.Background(), rootKey{}, runID)
	_, span := tracer().Start(ctx, SpanRun, trace.WithNewRoot(), trace.WithTimestamp(created),
		trace.WithAttributes(attribute.String(AttrRun, runID), attribute.String("agentgate.agent", agent),
			attribute.String("agentgate.run.status", status)))
	if status != "completed" {
		span.SetStatus(codes.Error, status+": "+errMsg)
	}
	span.End(trace.WithTimestamp(finished))
}

// Logs wraps h so that a record with a "run" attribute also carries the
// run's trace id (trace_id), and one logged with a span in its context
// that span's trace and span ids.
func Logs(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	} else {
		var run string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "run" && a.Value.Kind() == slog.KindString {
				run = a.Value.String()
				return false
			}
			return true
		})
		if run != "" {
			t, _ := IDs(run)
			r.AddAttrs(slog.String("trace_id", t.String()))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(as)}
}
func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.Handler.WithGroup(name)} }
