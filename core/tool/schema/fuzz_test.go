package schema_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core/tool/schema"
)

// fuzzSchemas are the schemas FuzzValidate checks arguments against: the
// deploy tool of the tests, and ones using the keywords whose messages this
// package words itself (const, oneOf, dependentRequired) or that do
// arithmetic on the model's numbers (multipleOf, maximum, uniqueItems).
var fuzzSchemas = []string{
	deploySchema,
	`{"type":"object","properties":{
	   "mode":{"const":"dry-run"},
	   "size":{"type":"number","multipleOf":0.5,"maximum":1e6,"exclusiveMinimum":0},
	   "tags":{"type":"array","items":{"type":"string","maxLength":8},"uniqueItems":true,"maxItems":4},
	   "when":{"oneOf":[{"type":"string","format":"date-time"},{"type":"integer","minimum":0}]},
	   "card":{"type":"string"},"cvv":{"type":"string","minLength":3}},
	 "dependentRequired":{"card":["cvv"]},
	 "propertyNames":{"pattern":"^[a-z]+$"},
	 "maxProperties":6}`,
	`{"type":"object","additionalProperties":{"type":["string","null"]},"not":{"required":["forbidden"]}}`,
	``,
}

// FuzzValidate feeds tool-call arguments, as a model writes them, to a few
// compiled schemas: Validate accepts only a JSON object and otherwise
// returns an *ArgumentsError that lists at least one violation, the same
// one every time, in a message the model can read.
func FuzzValidate(f *testing.F) {
	compiled := make([]*schema.Schema, len(fuzzSchemas))
	for i, src := range fuzzSchemas {
		s, err := schema.Compile("fuzz", json.RawMessage(src))
		if err != nil {
			f.Fatalf("Compile(%s): %v", src, err)
		}
		compiled[i] = s
	}
	for _, args := range []string{
		`{"service":"api","env":"staging"}`,
		`{"service":"api","env":"production","replicas":3,"target":"eu-1","config":{"region":"eu"}}`,
		`{"service":"api","env":"staging","replicas":100000000000000000000001}`,
		`{"service":1,"env":"dev","replicas":0}`,
		`{"service":"api","env":"staging","config":{"region":"a","region":"b"}}`,
		`{"service":"api","env":"staging"} {}`,
		`{"mode":"dry-run","size":2.5,"tags":["a","b"],"when":"2026-12-02T16:00:00Z","card":"4111"}`,
		`{"size":1e400,"when":-1e-400,"tags":["a","a"]}`,
		`{"size":0.30000000000000004,"Bad-Name":null}`,
		`{"a":null,"forbidden":"x"}`,
		// Found by this target: a number no exact rational holds crashed the
		// validator (nil *big.Rat) under minimum, maximum, multipleOf and
		// uniqueItems; it is an out-of-range violation now.
		`{"size":1e9999999}`, `{"replicas":-1e-9999999,"service":"api","env":"staging"}`, `{"tags":[1e9999999,1]}`,
		`{"size":1e999999}`, `{"size":1E+1000,"when":1e-1001}`,
		`[1,2]`, `"deploy api"`, `null`, `42`, ``, " \n", `{"service":"api"`, `service=api`,
	} {
		for i := range compiled {
			f.Add(uint8(i), []byte(args))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		s := compiled[int(which)%len(compiled)]
		err := s.Validate(args)
		if err == nil {
			if a := bytes.TrimSpace(args); !json.Valid(a) || a[0] != '{' {
				t.Fatalf("Validate(%q) = nil for arguments that are not a JSON object", args)
			}
			return
		}
		var ae *schema.ArgumentsError
		if !errors.As(err, &ae) {
			t.Fatalf("Validate(%q) error %v is %T, want *schema.ArgumentsError", args, err, err)
		}
		if len(ae.Violations) == 0 {
			t.Fatalf("Validate(%q) = %v: no violation listed", args, err)
		}
		for _, v := range ae.Violations {
			if strings.TrimSpace(v.Message) == "" {
				t.Fatalf("Validate(%q): violation at %q without a message", args, v.Pointer)
			}
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "arguments invalid: ") {
			t.Fatalf("Validate(%q) = %q, want it to start with \"arguments invalid: \"", args, msg)
		}
		if again := s.Validate(args); again == nil || again.Error() != msg {
			t.Fatalf("Validate(%q) is not stable: %q, then %v", args, msg, again)
		}
	})
}
