package chat

import (
	"bytes"
	"net/http"
)

// PostOnly reports whether r is a POST, the only method a platform's
// webhook takes; any other is answered 405 with Allow: POST.
func PostOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodPost {
		return true
	}
	w.Header().Set("Allow", http.MethodPost)
	http.Error(w, "use POST", http.StatusMethodNotAllowed)
	return false
}

// ReadBody reads r's body, at most limit bytes; a larger or unreadable one is
// answered 413 (false). A declared length over limit is refused before a
// byte is read, and memory follows the bytes that arrive, not the length
// a request declares: that is trusted up to 4 KiB, so a connection that
// declares a large body and sends none holds 4 KiB.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	body := http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength > limit {
		_ = body.Close()
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return nil, false
	}
	var b bytes.Buffer
	b.Grow(int(min(max(r.ContentLength, 512), 4<<10)))
	if _, err := b.ReadFrom(body); err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return nil, false
	}
	return b.Bytes(), true
}
