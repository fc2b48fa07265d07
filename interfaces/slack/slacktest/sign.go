package slacktest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"
)

// Signature returns Slack's v0 request signature of body sent at ts:
// "v0=" + hex(HMAC-SHA256(secret, "v0:<unix ts>:<body>")).
func Signature(secret string, body []byte, ts time.Time) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + strconv.FormatInt(ts.Unix(), 10) + ":"))
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// Sign sets the X-Slack-Request-Timestamp and X-Slack-Signature headers of req for body.
func Sign(req *http.Request, secret string, body []byte, ts time.Time) {
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("X-Slack-Signature", Signature(secret, body, ts))
}

// SignedRequest builds a POST to /slack/events carrying body, signed with secret as Slack
// would sign it at ts, ready for a handler's ServeHTTP. A body starting with '{' is sent as
// application/json (Events API), any other as a form (interactivity, slash commands).
func SignedRequest(secret string, body []byte, ts time.Time) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/slack/events", bytes.NewReader(body))
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		req.Header.Set("Content-Type", "application/json")
	} else {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	Sign(req, secret, body, ts)
	return req
}
