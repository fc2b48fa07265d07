package schema

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// ErrDuplicateKey is returned (wrapped) for a JSON object that names the same
// key twice. Parsers disagree on which value wins, so such arguments could be
// shown to an approver with one meaning and executed with another; they are
// refused instead.
var ErrDuplicateKey = errors.New("duplicate object key")

// FoldKey is k with each rune replaced by the smallest of its simple case
// folds: two keys encoding/json would match to one field fold alike.
func FoldKey(k string) string {
	return strings.Map(func(r rune) rune {
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				return r2
			}
			r = r2
		}
	}, k)
}

// Canonical re-encodes a JSON value canonically: object keys sorted by their
// UTF-8 bytes, no insignificant whitespace, numbers exactly as written (1.0
// stays 1.0, 1e3 stays 1e3), strings re-escaped the way encoding/json does
// minus HTML escaping (<, >, & are written as is). Canonical(Canonical(x))
// equals Canonical(x). It fails on invalid JSON, trailing data and duplicate
// object keys.
func Canonical(args json.RawMessage) (json.RawMessage, error) {
	v, err := decode(args)
	if err != nil {
		return nil, err
	}
	return encode(v)
}

// SHA256 returns the lowercase hex SHA-256 of the canonical form of args, so
// that {"b":1,"a":2} and { "a":2, "b":1 } hash equal. Approvals bind a
// decision to this hash.
//
// If args cannot be canonicalized (invalid JSON, duplicate keys), SHA256
// hashes the raw bytes instead: the hash stays deterministic and can never
// equal the hash of a canonical form, but callers should validate arguments
// (Schema.Validate or Canonical) before asking anyone to approve them.
func SHA256(args json.RawMessage) string {
	b, err := Canonical(args)
	if err != nil {
		b = args
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// decode parses exactly one JSON value into map[string]any, []any,
// json.Number, string, bool or nil, refusing duplicate object keys.
func decode(data []byte) (any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty input, want a JSON value")
	}
	// json.Valid reports syntax errors with no partial work and enforces
	// encoding/json's nesting limit, which bounds the recursion below.
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v) // for the position and cause
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, "")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the top-level value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, ptr string) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // string, json.Number, bool or nil
	}
	switch d {
	case '{':
		obj := map[string]any{}
		folded := map[string]string{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("invalid JSON: %w", err)
			}
			k, ok := kt.(string)
			if !ok {
				return nil, fmt.Errorf("invalid JSON: object key %v is not a string", kt)
			}
			child := ptr + "/" + escapePointer(k)
			if _, dup := obj[k]; dup {
				return nil, fmt.Errorf("%w %q at %s", ErrDuplicateKey, k, pointerOrRoot(ptr))
			}
			if other, dup := folded[FoldKey(k)]; dup {
				// A Go tool matches keys to fields ignoring case (and
				// folds ſ to s, K to k): it would read one of them.
				return nil, fmt.Errorf("%w: %q and %q differ only in case at %s", ErrDuplicateKey, other, k, pointerOrRoot(ptr))
			}
			folded[FoldKey(k)] = k
			v, err := decodeValue(dec, child)
			if err != nil {
				return nil, err
			}
			obj[k] = v
		}
		if _, err := dec.Token(); err != nil { // '}'
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		return obj, nil
	case '[':
		arr := []any{}
		for i := 0; dec.More(); i++ {
			v, err := decodeValue(dec, fmt.Sprintf("%s/%d", ptr, i))
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		return arr, nil
	}
	return nil, fmt.Errorf("invalid JSON: unexpected %v", d)
}

// encode writes v with sorted keys (encoding/json sorts map keys) and
// without HTML escaping or the Encoder's trailing newline.
func encode(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode canonical JSON: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
