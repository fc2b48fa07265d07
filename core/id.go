package core

import (
	"crypto/rand"
	"encoding/base32"
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
