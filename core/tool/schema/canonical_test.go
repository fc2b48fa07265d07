package schema_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core/tool/schema"
)

func TestCanonical(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"sorted keys", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"whitespace", " {\n\t\"a\" : 2 ,\r\n \"b\":1 } ", `{"a":2,"b":1}`},
		{"nested", `{"z":{"y":[3,{"d":1,"c":2}],"x":null},"a":true}`, `{"a":true,"z":{"x":null,"y":[3,{"c":2,"d":1}]}}`},
		{"numbers as written", `{"a":1.0,"b":1e3,"c":-0,"d":12345678901234567890123,"e":1.5E-7}`, `{"a":1.0,"b":1e3,"c":-0,"d":12345678901234567890123,"e":1.5E-7}`},
		{"array order kept", `[3,1,2]`, `[3,1,2]`},
		{"no HTML escaping", `{"q":"a<b && c>d"}`, `{"q":"a<b && c>d"}`},
		{"escapes normalized", `{"s":"\u0041\/\u00e9"}`, `{"s":"A/é"}`},
		{"control characters escaped", `{"s":"a\u0001b\nc"}`, `{"s":"a\u0001b\nc"}`},
		{"scalar", ` "x" `, `"x"`},
		{"empty containers", `{"a":{},"b":[]}`, `{"a":{},"b":[]}`},
		{"keys sorted bytewise", `{"é":1,"z":2,"Y":3,"":4}`, `{"":4,"Y":3,"z":2,"é":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := schema.Canonical(json.RawMessage(tt.in))
			if err != nil {
				t.Fatalf("Canonical(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonical(%s)\n got: %s\nwant: %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestCanonicalErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"empty", ``, "empty"},
		{"invalid", `{"a":}`, "invalid JSON"},
		{"trailing data", `{} {}`, "invalid JSON"},
		{"duplicate key", `{"a":1,"a":1}`, `duplicate object key "a"`},
		{"nested duplicate key", `{"x":[{"k":1,"k":2}]}`, `duplicate object key "k" at /x/0`},
		// A Go tool decoding into a struct reads one of these as the other.
		{"keys differing in case", `{"namespace":"staging","Namespace":"kube-system"}`, `"namespace" and "Namespace" differ only in case`},
		{"keys folding alike", `{"namespace":"staging","nameſpace":"kube-system"}`, `differ only in case at /`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := schema.Canonical(json.RawMessage(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Canonical(%s) error = %v, want it to contain %q", tt.in, err, tt.want)
			}
		})
	}
	if _, err := schema.Canonical(json.RawMessage(`{"a":1,"a":2}`)); !errors.Is(err, schema.ErrDuplicateKey) {
		t.Errorf("duplicate key error = %v, want errors.Is ErrDuplicateKey", err)
	}
}

func TestSHA256(t *testing.T) {
	t.Parallel()
	equal := [][2]string{
		{`{"b":1,"a":2}`, `{ "a":2, "b":1 }`},
		{`{"service":"api","env":"production"}`, "{\n  \"env\": \"production\",\n  \"service\": \"api\"\n}"},
		{`{"s":"\u00e9"}`, `{"s":"é"}`},
		{`{"a":{"y":1,"x":2}}`, `{"a":{"x":2,"y":1}}`},
	}
	for _, p := range equal {
		if a, b := schema.SHA256(json.RawMessage(p[0])), schema.SHA256(json.RawMessage(p[1])); a != b {
			t.Errorf("SHA256(%s) = %s, SHA256(%s) = %s, want equal", p[0], a, p[1], b)
		}
	}
	different := [][2]string{
		{`{"env":"staging"}`, `{"env":"production"}`},
		{`{"a":1}`, `{"a":1.0}`},     // numbers are bound as written
		{`{"a":1}`, `{"a":"1"}`},     // types matter
		{`[1,2]`, `[2,1]`},           // array order matters
		{`{"a":null}`, `{}`},         // an explicit null is not absence
		{`{"a":1,"a":1}`, `{"a":1}`}, // refused input never hashes like a canonical one
	}
	for _, p := range different {
		if a, b := schema.SHA256(json.RawMessage(p[0])), schema.SHA256(json.RawMessage(p[1])); a == b {
			t.Errorf("SHA256(%s) == SHA256(%s) = %s, want different", p[0], p[1], a)
		}
	}
	// The hash is the lowercase hex SHA-256 of the canonical bytes, so
	// anyone holding the arguments can recompute it.
	sum := sha256.Sum256([]byte(`{"a":2,"b":1}`))
	if got, want := schema.SHA256(json.RawMessage(`{ "b":1, "a":2 }`)), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("SHA256 = %s, want %s", got, want)
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":2}`, `{ "a":2, "b":1 }`, `[1,2,{"z":null,"y":[true,false]}]`, `"x"`, `1.0e-7`,
		`{"s":"<\u0000\ud800\u2028>"}`, `{"a":{"a":{"a":{}}}}`, `{"a":1,"a":2}`, `{"é":"\xff"}`, `-0`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			if _, err := schema.Canonical(in); err == nil {
				t.Fatalf("Canonical(%q) accepted invalid JSON", in)
			}
			return
		}
		c1, err := schema.Canonical(in)
		if err != nil {
			if errors.Is(err, schema.ErrDuplicateKey) {
				return
			}
			t.Fatalf("Canonical(%q): %v", in, err)
		}
		if !json.Valid(c1) {
			t.Fatalf("Canonical(%q) = %q, not valid JSON", in, c1)
		}
		c2, err := schema.Canonical(c1)
		if err != nil {
			t.Fatalf("Canonical(Canonical(%q)) = %v", in, err)
		}
		if !bytes.Equal(c1, c2) {
			t.Fatalf("not idempotent for %q:\n once: %s\ntwice: %s", in, c1, c2)
		}
		if schema.SHA256(in) != schema.SHA256(c1) {
			t.Fatalf("SHA256(%q) != SHA256(canonical)", in)
		}
		// Same meaning: both decode to the same value, numbers as written.
		if a, b := decodeNumbers(t, in), decodeNumbers(t, c1); !reflect.DeepEqual(a, b) {
			t.Fatalf("Canonical(%q) = %s changed the value", in, c1)
		}
	})
}

func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}
