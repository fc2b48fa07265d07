package core

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
)

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID returns prefix_ followed by 16 random base32 characters (80 bits).
func NewID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return prefix + "_" + idEncoding.EncodeToString(b[:])
}

// ValidID reports whether s looks like an id this package made with prefix
// (or any prefix when prefix is ""); callers use it to reject junk early.
func ValidID(s string) bool {
	i := strings.IndexByte(s, '_')
	if i <= 0 || len(s)-i-1 != 16 {
		return false
	}
	for _, c := range s[i+1:] {
		if !strings.ContainsRune("0123456789abcdefghjkmnpqrstvwxyz", c) {
			return false
		}
	}
	return true
}

// sessionIDPattern is a session id the API takes: 1–128 of A-Za-z0-9_.:-,
// starting with a letter or digit.
var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// ValidSessionID reports whether s is a session id the API takes.
func ValidSessionID(s string) bool { return sessionIDPattern.MatchString(s) }

// sessionKinds are the second part of the session ids the gateway names
// itself ({agent}:{kind}:…; agent ids have no colon), and the prefix of
// their hashed forms (SessionIDFor): the chat platforms' and routines'.
var sessionKinds = []string{"slack", "discord", "telegram", "routine"}

// hashedSessionID is SessionIDFor's hash of a key.
var hashedSessionID = regexp.MustCompile(`^[a-z]+_[0-9a-f]{32}$`)

// GatewaySessionID reports whether id has the shape of a session the
// gateway names itself: a chat conversation's or a routine's. A session
// keeps the binding it was created with, so one created first by someone
// else would take the conversation's (or routine's) place.
func GatewaySessionID(id string) bool {
	parts := strings.SplitN(id, ":", 3)
	if len(parts) >= 2 && slices.Contains(sessionKinds, parts[1]) {
		return true
	}
	kind, _, _ := strings.Cut(id, "_")
	return hashedSessionID.MatchString(id) && slices.Contains(sessionKinds, kind)
}

// SessionIDFor is key when it is a valid session id, else prefix_ and a
// stable hash of key (too long, or odd characters in it).
func SessionIDFor(key, prefix string) string {
	if ValidSessionID(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return prefix + "_" + hex.EncodeToString(sum[:16])
}
