package slack

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	now := time.Unix(1531420618, 0)
	body := []byte(`token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&command=%2Fagentgate&text=help`)
	sig, ts := Sign(secret, now, body)

	header := func(sig, ts string) http.Header {
		h := http.Header{}
		if sig != "" {
			h.Set(HeaderSignature, sig)
		}
		if ts != "" {
			h.Set(HeaderTimestamp, ts)
		}
		return h
	}
	tests := []struct {
		name   string
		secret string
		h      http.Header
		body   []byte
		now    time.Time
		want   error
	}{
		{"valid", secret, header(sig, ts), body, now, nil},
		{"valid 4m59s later", secret, header(sig, ts), body, now.Add(4*time.Minute + 59*time.Second), nil},
		{"valid clock behind", secret, header(sig, ts), body, now.Add(-4 * time.Minute), nil},
		{"six minutes old", secret, header(sig, ts), body, now.Add(6 * time.Minute), ErrStaleTimestamp},
		{"six minutes ahead", secret, header(sig, ts), body, now.Add(-6 * time.Minute), ErrStaleTimestamp},
		{"no headers", secret, header("", ""), body, now, ErrMissingSignature},
		{"no timestamp", secret, header(sig, ""), body, now, ErrMissingSignature},
		{"garbage timestamp", secret, header(sig, "yesterday"), body, now, ErrStaleTimestamp},
		{"body changed", secret, header(sig, ts), append([]byte{}, append(body, '1')...), now, ErrBadSignature},
		{"wrong secret", "other", header(sig, ts), body, now, ErrBadSignature},
		{"v1 signature", secret, header("v1="+sig[3:], ts), body, now, ErrBadSignature},
		{"not hex", secret, header("v0=zz", ts), body, now, ErrBadSignature},
		{"short", secret, header(sig[:20], ts), body, now, ErrBadSignature},
		{"timestamp replaced", secret, header(sig, "1531420619"), body, now, ErrBadSignature},
		{"no secret configured", "", header(sig, ts), body, now, ErrNoSigningSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Verify(tt.secret, tt.h, tt.body, tt.now)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !errors.Is(err, ErrUnverified) {
				t.Fatalf("Verify = %v, want %v wrapping ErrUnverified", err, tt.want)
			}
		})
	}
}

// Slack's documented example: https://docs.slack.dev/authentication/verifying-requests-from-slack/
func TestVerifySlackExample(t *testing.T) {
	t.Parallel()
	body := []byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
	h := http.Header{}
	h.Set(HeaderTimestamp, "1531420618")
	h.Set(HeaderSignature, "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503")
	if err := Verify("8f742231b10e8888abcd99yyyzzz85a5", h, body, time.Unix(1531420618, 0)); err != nil {
		t.Fatalf("Verify(Slack's example) = %v", err)
	}
}
