package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/tidwall/gjson"

	"github.com/agentgate/agentgate/core"
)

// Generate reads its stream with this file, not with the client's
// ssestream.Stream and ChatCompletionAccumulator, whose reflective decoder
// costs more CPU than the rest of a turn. It reads a stream as they do: it
// accepts, rejects and makes of each chunk what they do, within the same
// limits (FuzzGenerateMatchesClient holds it to that).

// Limits of a stream.
const (
	// maxEvent bounds a line of the event stream (the client's
	// bufio.Scanner limit) and the data of one event, which may span lines.
	maxEvent = bufio.MaxScanTokenSize << 9 // 32 MiB
	// maxChoiceIndex is the highest choice index a chunk may carry.
	maxChoiceIndex = 127
	// maxToolCallGrowth bounds how far past the tool calls so far a
	// tool-call index may point, so that a sparse index cannot allocate
	// without bound. A chunk shares maxToolCallGrowth-1 positions of growth
	// beyond one per tool-call delta it carries.
	maxToolCallGrowth = 128
	// maxNesting is how deep encoding/json, which decoded chunks for the
	// client, lets JSON nest.
	maxNesting = 10000
	// drainWait and maxDrain bound how long and how much of a body is read
	// after [DONE] (see drain).
	drainWait = 100 * time.Millisecond
	maxDrain  = 4 << 10
)

// eventReader splits a text/event-stream body into the data of its events,
// as the client's ssestream decoder does: a line ends in LF or CRLF; the
// values of an event's "data" lines are joined, each followed by LF; a blank
// line ends an event that has data; comments and the other fields (event,
// id, retry) are ignored; an event the body ends in before its blank line is
// dropped.
type eventReader struct {
	r     *bufio.Reader
	limit int    // of a line and of an event's data, in bytes
	data  []byte // the event being read
	long  []byte // a line longer than r's buffer
}

func newEventReader(r io.Reader, limit int) *eventReader {
	return &eventReader{r: bufio.NewReader(r), limit: limit}
}

// next returns the data of the next event, valid until the following call,
// or io.EOF at the end of the body.
func (e *eventReader) next() ([]byte, error) {
	e.data = e.data[:0]
	for {
		line, err := e.line()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if len(e.data) > 0 {
				return e.data, nil
			}
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if string(name) != "data" {
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if len(e.data)+len(value)+1 > e.limit {
			return nil, fmt.Errorf("stream: event larger than %d bytes", e.limit)
		}
		e.data = append(e.data, value...)
		e.data = append(e.data, '\n')
	}
}

// line returns the next line without its LF or CRLF, valid until the
// following call.
func (e *eventReader) line() ([]byte, error) {
	line, err := e.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		e.long = append(e.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = e.r.ReadSlice('\n')
			if len(e.long)+len(line) > e.limit {
				return nil, fmt.Errorf("stream: line longer than %d bytes", e.limit)
			}
			e.long = append(e.long, line...)
		}
		line = e.long
	}
	if err != nil {
		return nil, err // at io.EOF, a line without its end cannot end an event
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// turn accumulates one streamed assistant turn as the client's
// ChatCompletionAccumulator did, for what Generate returns: the text,
// refusal and tool calls of choice 0, whether it finished and why, and the
// usage.
type turn struct {
	onDelta  func(text string)
	text     strings.Builder
	refusal  strings.Builder
	calls    []toolCall // choice 0's, by index; a skipped index stays empty
	counts   []int      // how many tool calls each choice index has
	finished bool
	reason   string // choice 0's last finish reason
	usage    core.Usage

	// The chunk being added, reused from chunk to chunk.
	choices []choiceDelta
	deltas  []toolCallDelta
}

type toolCall struct {
	id         string
	name, args []byte
}

type choiceDelta struct {
	index                          int64
	content, refusal, finishReason string
	lo, hi                         int // its tool-call deltas in turn.deltas
}

type toolCallDelta struct {
	index          int64
	id, name, args string
}

// read adds the events of res's body to the turn, up to [DONE] or the end.
func (t *turn) read(res *http.Response) error {
	if res == nil || res.Body == nil {
		return nil
	}
	events := newEventReader(res.Body, maxEvent)
	for {
		data, err := events.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		done, err := t.add(data)
		if err != nil {
			return err
		}
		if done {
			drain(res.Body)
			return nil
		}
	}
}

// drain reads what is left of body after [DONE], which a server sends just
// before it ends the response: the transport reuses an HTTP/1 connection
// only when its body was read to the end, and drops it when it was closed
// early. A server that keeps the response open is not waited for long.
func drain(body io.ReadCloser) {
	stop := time.AfterFunc(drainWait, func() { _ = body.Close() })
	defer stop.Stop()
	_, _ = io.CopyN(io.Discard, body, maxDrain)
}

// add adds the data of one event to the turn; done reports [DONE], after
// which the stream has nothing to say.
func (t *turn) add(data []byte) (done bool, err error) {
	if bytes.HasPrefix(data, []byte("[DONE]")) {
		return true, nil
	}
	s := string(data) // the strings decoded from s outlive data
	chunk := gjson.Parse(s)
	if !chunk.IsObject() || !validJSON(data) {
		// The client reported an "error" member before it looked further.
		if e := gjson.Get(s, "error"); e.Exists() {
			return false, streamError(e, s)
		}
		switch {
		case !validJSON(data):
			return false, fmt.Errorf("stream: chunk is not JSON: %.100q", s)
		case chunk.Type == gjson.Null:
			return false, nil // the client decoded null as a chunk without choices
		default:
			return false, errors.New("stream: chunk is not a JSON object")
		}
	}

	t.choices, t.deltas = t.choices[:0], t.deltas[:0]
	var (
		usage gjson.Result
		seen  members
	)
	chunk.ForEach(func(key, value gjson.Result) bool {
		switch key.Str {
		case "error":
			err = streamError(value, s)
			return false
		case "choices":
			if seen.first(0) {
				t.decodeChoices(value)
			}
		case "usage":
			if seen.first(1) {
				usage = value
			}
		}
		return true
	})
	if err != nil {
		return false, err
	}
	if err := t.fit(); err != nil {
		return false, fmt.Errorf("stream: chunk does not fit the response so far: %w", err)
	}

	// OpenAI sends usage once, on a last chunk without choices; other
	// servers repeat a running total on every chunk or send none at all.
	// The last one seen is the total either way.
	if usage.IsObject() {
		t.usage = core.Usage{}
		var seen members
		usage.ForEach(func(key, value gjson.Result) bool {
			switch key.Str {
			case "prompt_tokens":
				if seen.first(0) {
					t.usage.InputTokens = value.Int()
				}
			case "completion_tokens":
				if seen.first(1) {
					t.usage.OutputTokens = value.Int()
				}
			}
			return true
		})
	}
	for _, c := range t.choices {
		if c.index != 0 {
			continue
		}
		if c.finishReason != "" {
			t.finished = true
			t.reason = c.finishReason
		}
		t.text.WriteString(c.content)
		t.refusal.WriteString(c.refusal)
		if t.onDelta != nil {
			if c.content != "" {
				t.onDelta(c.content)
			}
			if c.refusal != "" {
				t.onDelta(c.refusal)
			}
		}
		if n := t.counts[0]; n > len(t.calls) {
			t.calls = append(t.calls, make([]toolCall, n-len(t.calls))...)
		}
		for _, d := range t.deltas[c.lo:c.hi] {
			tc := &t.calls[max(d.index, 0)] // -1 is 0, fit has checked the rest
			if d.id != "" {
				tc.id = d.id
			}
			tc.name = append(tc.name, d.name...)
			tc.args = append(tc.args, d.args...)
		}
	}
	return false, nil
}

// validJSON reports whether data is JSON as encoding/json, which decoded
// chunks for the client, judges it. gjson's validator is four times as fast
// but recursive, without a depth limit: JSON of at most 2×maxNesting bytes
// cannot nest deeper than encoding/json allows, and for it the two agree.
func validJSON(data []byte) bool {
	if len(data) <= 2*maxNesting {
		return gjson.ValidBytes(data)
	}
	return json.Valid(data)
}

// streamError is the error the client's stream returned for a chunk with an
// "error" member.
func streamError(e gjson.Result, data string) error {
	return &ssestream.StreamError{
		Message: "received error while streaming: " + e.String(),
		Event:   ssestream.Event{Data: []byte(data)},
	}
}

// The decoders below read a chunk as the client's decoder did: a member of
// the wrong type is dropped, a string member takes any scalar's text (and an
// object's or array's JSON), a number member any value's gjson Int, the
// first of duplicate members wins, and one element that is not an object
// (or null, an empty one) drops the whole array.

// members records which members of an object have been read, by bit.
type members uint8

// first reports whether member bit is read for the first time.
func (m *members) first(bit uint) bool {
	if *m&(1<<bit) != 0 {
		return false
	}
	*m |= 1 << bit
	return true
}

// decodeChoices decodes the chunk's choices into t.choices and t.deltas.
func (t *turn) decodeChoices(v gjson.Result) {
	t.choices, t.deltas = t.choices[:0], t.deltas[:0]
	if !v.IsArray() {
		return
	}
	ok := true
	v.ForEach(func(_, v gjson.Result) bool {
		c := choiceDelta{lo: len(t.deltas)}
		switch {
		case v.IsObject():
			t.decodeChoice(v, &c)
		case v.Type != gjson.Null:
			ok = false
			return false
		}
		c.hi = len(t.deltas)
		t.choices = append(t.choices, c)
		return true
	})
	if !ok {
		t.choices, t.deltas = t.choices[:0], t.deltas[:0]
	}
}

func (t *turn) decodeChoice(v gjson.Result, c *choiceDelta) {
	var seen members
	v.ForEach(func(key, v gjson.Result) bool {
		switch key.Str {
		case "index":
			if seen.first(0) {
				c.index = v.Int()
			}
		case "finish_reason":
			if seen.first(1) {
				c.finishReason = v.String()
			}
		case "delta":
			if seen.first(2) && v.IsObject() {
				t.decodeDelta(v, c)
			}
		}
		return true
	})
}

func (t *turn) decodeDelta(v gjson.Result, c *choiceDelta) {
	var seen members
	v.ForEach(func(key, v gjson.Result) bool {
		switch key.Str {
		case "content":
			if seen.first(0) {
				c.content = v.String()
			}
		case "refusal":
			if seen.first(1) {
				c.refusal = v.String()
			}
		case "tool_calls":
			if seen.first(2) && v.IsArray() {
				t.decodeToolCalls(v, c.lo)
			}
		}
		return true
	})
}

func (t *turn) decodeToolCalls(v gjson.Result, lo int) {
	ok := true
	v.ForEach(func(_, v gjson.Result) bool {
		var d toolCallDelta
		switch {
		case v.IsObject():
			d = decodeToolCall(v)
		case v.Type != gjson.Null:
			ok = false
			return false
		}
		t.deltas = append(t.deltas, d)
		return true
	})
	if !ok {
		t.deltas = t.deltas[:lo]
	}
}

func decodeToolCall(v gjson.Result) toolCallDelta {
	var (
		d    toolCallDelta
		seen members
	)
	v.ForEach(func(key, v gjson.Result) bool {
		switch key.Str {
		case "index":
			if seen.first(0) {
				d.index = v.Int()
			}
		case "id":
			if seen.first(1) {
				d.id = v.String()
			}
		case "function":
			if seen.first(2) && v.IsObject() {
				var seen members
				v.ForEach(func(key, v gjson.Result) bool {
					switch key.Str {
					case "name":
						if seen.first(0) {
							d.name = v.String()
						}
					case "arguments":
						if seen.first(1) {
							d.args = v.String()
						}
					}
					return true
				})
			}
		}
		return true
	})
	return d
}

// fit checks the chunk's indexes against the bounds the client's accumulator
// kept (see maxChoiceIndex and maxToolCallGrowth) and counts its tool calls.
func (t *turn) fit() error {
	growth := maxToolCallGrowth - 1
	for _, c := range t.choices {
		growth += c.hi - c.lo
	}
	for _, c := range t.choices {
		if c.index < 0 || c.index > maxChoiceIndex {
			return fmt.Errorf("choice index %d is not between 0 and %d", c.index, maxChoiceIndex)
		}
		if n := int(c.index) + 1; n > len(t.counts) {
			t.counts = append(t.counts, make([]int, n-len(t.counts))...)
		}
		count := &t.counts[c.index]
		for _, d := range t.deltas[c.lo:c.hi] {
			i := d.index
			if i == -1 {
				i = 0 // what AWS Bedrock sends for a single tool call
			}
			if i < 0 || i-int64(*count) >= maxToolCallGrowth {
				return fmt.Errorf("tool-call index %d is not between -1 and %d", d.index, *count+maxToolCallGrowth-1)
			}
			if n := int(i) + 1; n > *count {
				if n-*count > growth {
					return fmt.Errorf("tool-call index %d skips too many", d.index)
				}
				growth -= n - *count
				*count = n
			}
		}
	}
	return nil
}

// response is the turn as Generate returns it.
func (t *turn) response() core.ModelResponse {
	resp := core.ModelResponse{Text: t.text.String(), Usage: t.usage, StopReason: t.reason}
	if resp.Text == "" {
		resp.Text = t.refusal.String()
	}
	for _, tc := range t.calls {
		if tc.id == "" && len(tc.name) == 0 && len(tc.args) == 0 {
			continue // a gap left by a server that skipped a tool-call index
		}
		id := tc.id
		if id == "" {
			// Some servers omit tool-call ids; the engine keys idempotency
			// and approvals on them, so each call needs a unique one.
			id = core.NewID("call")
		}
		resp.ToolCalls = append(resp.ToolCalls, core.ToolCall{
			ID:        id,
			Name:      string(tc.name),
			Arguments: arguments(string(tc.args)),
		})
	}
	return resp
}
