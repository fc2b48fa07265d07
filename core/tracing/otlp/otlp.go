// Package otlp sends agentgate's traces (package tracing) to an
// OpenTelemetry collector over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT
// (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set. The exporter reads the
// standard OTEL_EXPORTER_OTLP_* settings (headers, timeout, compression),
// the batcher OTEL_BSP_*, the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
package otlp

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentgate/agentgate/core/tracing"
)

// Configured reports whether the environment asks for traces.
func Configured() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs a tracer provider that sends spans over OTLP/HTTP, when
// Configured; shutdown flushes what is left and stops it (a no-op when
// nothing was installed). version names the service's version.
func Setup(ctx context.Context, version string) (shutdown func(context.Context) error, err error) {
	if !Configured() || os.Getenv("OTEL_SDK_DISABLED") == "true" {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := newExporter()
	if err != nil {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "agentgate"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(newIDs()))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tracing.Enable()
	return tp.Shutdown, nil
}

// ids gives a run span the ids its run's id derives (tracing.Root), every
// other span random ones.
type ids struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newIDs() *ids {
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	return &ids{r: rand.New(rand.NewChaCha8(seed))}
}

func (g *ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if t, s, ok := tracing.Root(ctx); ok {
		return t, s
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var t trace.TraceID
	binary.LittleEndian.PutUint64(t[:8], g.r.Uint64())
	binary.LittleEndian.PutUint64(t[8:], g.r.Uint64())
	return t, g.span()
}

func (g *ids) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.span()
}

func (g *ids) span() trace.SpanID {
	var s trace.SpanID
	for s == (trace.SpanID{}) {
		binary.LittleEndian.PutUint64(s[:], g.r.Uint64())
	}
	return s
}
