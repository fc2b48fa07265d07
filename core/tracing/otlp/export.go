package otlp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// exporter sends spans to an OTLP/HTTP receiver as protobuf
// (ExportTraceServiceRequest). It is the OTLP exporter's wire format
// without its gRPC dependencies, which would double the binary.
type exporter struct {
	url     string
	headers http.Header
	client  *http.Client
}

var _ sdktrace.SpanExporter = (*exporter)(nil)

// newExporter reads the OTEL_EXPORTER_OTLP_* settings.
func newExporter() (*exporter, error) {
	u, suffix := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), ""
	if u == "" {
		u, suffix = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "/v1/traces"
	}
	if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return nil, fmt.Errorf("%q is not an http:// or https:// URL (like http://collector:4318)", u)
	}
	u = strings.TrimSuffix(u, "/") + suffix
	e := &exporter{url: u, headers: http.Header{}, client: &http.Client{Timeout: 10 * time.Second}}
	for _, env := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for _, kv := range strings.Split(os.Getenv(env), ",") {
			if strings.TrimSpace(kv) == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			k, kerr := url.QueryUnescape(strings.TrimSpace(k))
			v, verr := url.QueryUnescape(strings.TrimSpace(v))
			if !ok || k == "" || kerr != nil || verr != nil {
				return nil, fmt.Errorf("%s: want key=value pairs separated by commas (values URL-encoded), got %q", env, kv)
			}
			e.headers.Set(k, v)
		}
	}
	for _, env := range []string{"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"} {
		if v := os.Getenv(env); v != "" {
			ms, err := strconv.Atoi(v)
			if err != nil || ms <= 0 {
				return nil, fmt.Errorf("%s: want milliseconds, like 10000, got %q", env, v)
			}
			e.client.Timeout = time.Duration(ms) * time.Millisecond
		}
	}
	return e, nil
}

// ExportSpans sends spans in one request; a receiver that is busy (429,
// 502, 503, 504) or unreachable gets two more tries.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body, err := request(spans)
	if err != nil {
		return err
	}
	for try := 1; ; try++ {
		err = e.post(ctx, body)
		if err == nil || try == 3 || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try) * time.Second):
		}
	}
}

func (e *exporter) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range e.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("otlp traces: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("otlp traces: %s answered %s: %s", e.url, resp.Status, msg)
	}
	return nil
}

func (e *exporter) Shutdown(context.Context) error { return nil }

// request is the ExportTraceServiceRequest of spans: its field 1 repeated,
// one ResourceSpans per resource, with a ScopeSpans per scope.
func request(spans []sdktrace.ReadOnlySpan) ([]byte, error) {
	type group struct {
		res    *resource.Resource
		scopes map[instrumentation.Scope]*tracepb.ScopeSpans
		order  []instrumentation.Scope
	}
	var groups []*group
	for _, s := range spans {
		var g *group
		for _, x := range groups {
			if x.res == s.Resource() {
				g = x
			}
		}
		if g == nil {
			g = &group{res: s.Resource(), scopes: map[instrumentation.Scope]*tracepb.ScopeSpans{}}
			groups = append(groups, g)
		}
		sc := s.InstrumentationScope()
		ss, ok := g.scopes[sc]
		if !ok {
			ss = &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: sc.Name, Version: sc.Version}, SchemaUrl: sc.SchemaURL}
			g.scopes[sc] = ss
			g.order = append(g.order, sc)
		}
		ss.Spans = append(ss.Spans, span(s))
	}
	var out []byte
	for _, g := range groups {
		rs := &tracepb.ResourceSpans{Resource: &resourcepb.Resource{Attributes: attrs(g.res.Attributes())}, SchemaUrl: g.res.SchemaURL()}
		for _, sc := range g.order {
			rs.ScopeSpans = append(rs.ScopeSpans, g.scopes[sc])
		}
		b, err := proto.Marshal(rs)
		if err != nil {
			return nil, err
		}
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, b)
	}
	return out, nil
}

func span(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	p := &tracepb.Span{
		TraceId: tid[:], SpanId: sid[:], TraceState: sc.TraceState().String(), Name: s.Name(),
		Kind:              tracepb.Span_SpanKind(s.SpanKind()), // the same numbers
		StartTimeUnixNano: uint64(s.StartTime().UnixNano()), EndTimeUnixNano: uint64(s.EndTime().UnixNano()),
		Attributes: attrs(s.Attributes()), DroppedAttributesCount: uint32(s.DroppedAttributes()),
		Flags: uint32(sc.TraceFlags()),
	}
	if parent := s.Parent(); parent.IsValid() {
		psid := parent.SpanID()
		p.ParentSpanId = psid[:]
	}
	switch st := s.Status(); st.Code {
	case codes.Error:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: st.Description}
	case codes.Ok:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	}
	for _, ev := range s.Events() {
		p.Events = append(p.Events, &tracepb.Span_Event{Name: ev.Name, TimeUnixNano: uint64(ev.Time.UnixNano()),
			Attributes: attrs(ev.Attributes)})
	}
	return p
}

func attrs(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	out := make([]*commonpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: value(kv.Value)})
	}
	return out
}

func value(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
	}
	// Slices: as their JSON-ish text, which every backend shows.
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.String()}}
}
