package api

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Default caps on open event streams (Config.MaxStreams, MaxStreamsPerKey).
const (
	DefaultMaxStreams       = 1000
	DefaultMaxStreamsPerKey = 100
)

// streamWriteTimeout is how long one write to an event stream may take: a
// client that stops reading is cut off instead of holding the stream open.
const streamWriteTimeout = 30 * time.Second

// streams counts the event streams open in all and per principal.
type streams struct {
	mu     sync.Mutex
	max    int
	perKey int
	total  int
	by     map[string]int
}

func newStreams(max, perKey int) *streams {
	if max <= 0 {
		max = DefaultMaxStreams
	}
	if perKey <= 0 {
		perKey = DefaultMaxStreamsPerKey
	}
	return &streams{max: max, perKey: perKey, by: map[string]int{}}
}

// open takes a stream slot for who, or answers 429 and returns false.
// The caller calls the returned release when the stream ends.
func (s *streams) open(w http.ResponseWriter, who string) (release func(), ok bool) {
	s.mu.Lock()
	msg := ""
	switch {
	case s.total >= s.max:
		msg = "the gateway has " + strconv.Itoa(s.max) + " event streams open (server.max_streams); retry later"
	case s.by[who] >= s.perKey:
		msg = who + " has " + strconv.Itoa(s.perKey) + " event streams open (server.max_streams_per_key); close one first"
	default:
		s.total++
		s.by[who]++
	}
	s.mu.Unlock()
	if msg != "" {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusTooManyRequests, "too_many_streams", msg)
		return nil, false
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.total--
			if s.by[who]--; s.by[who] == 0 {
				delete(s.by, who)
			}
			s.mu.Unlock()
		})
	}, true
}
