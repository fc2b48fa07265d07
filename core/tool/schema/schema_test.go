package schema_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core/tool/schema"
)

const deploySchema = `{
  "type": "object",
  "properties": {
    "service": {"type": "string", "pattern": "^[a-z-]+$"},
    "env": {"enum": ["staging", "production"]},
    "replicas": {"type": "integer", "minimum": 1},
    "target": {"anyOf": [{"type": "integer"}, {"type": "string", "minLength": 3}]},
    "config": {"$ref": "#/$defs/config"}
  },
  "required": ["service", "env"],
  "additionalProperties": false,
  "$defs": {"config": {"type": "object", "required": ["region"]}}
}`

func mustCompile(t *testing.T, name, src string) *schema.Schema {
	t.Helper()
	s, err := schema.Compile(name, json.RawMessage(src))
	if err != nil {
		t.Fatalf("Compile(%s): %v", name, err)
	}
	return s
}

func TestValidate(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "deploy", deploySchema)
	tests := []struct {
		name string
		args string
		want string // exact error message; "" means valid
	}{
		{name: "valid", args: `{"service":"api","env":"staging"}`},
		{name: "valid with all fields", args: `{"service":"api","env":"production","replicas":3,"target":"eu-1","config":{"region":"eu"}}`},
		{name: "valid big number kept exact", args: `{"service":"api","env":"staging","replicas":100000000000000000000001}`},
		{name: "valid whitespace", args: " \n{ \"env\" : \"staging\", \"service\" : \"api\" }\n"},
		{
			name: "enum and required",
			args: `{"env":"dev"}`,
			want: `arguments invalid: missing property "service"; /env: value must be one of "staging", "production"`,
		},
		{
			name: "missing several",
			args: `{}`,
			want: `arguments invalid: missing properties "service", "env"`,
		},
		{
			name: "type",
			args: `{"service":"api","env":"staging","replicas":"three"}`,
			want: `arguments invalid: /replicas: must be integer, got string`,
		},
		{
			name: "integer not number",
			args: `{"service":"api","env":"staging","replicas":1.5}`,
			want: `arguments invalid: /replicas: must be integer, got number`,
		},
		{
			name: "minimum",
			args: `{"service":"api","env":"staging","replicas":0}`,
			want: `arguments invalid: /replicas: minimum: got 0, want 1`,
		},
		{
			name: "additional properties",
			args: `{"service":"api","env":"staging","force":true}`,
			want: `arguments invalid: property "force" is not allowed`,
		},
		{
			name: "several additional properties",
			args: `{"service":"api","env":"staging","force":true,"dry_run":false}`,
			want: `arguments invalid: properties "dry_run", "force" are not allowed`,
		},
		{
			name: "pattern",
			args: `{"service":"API","env":"staging"}`,
			want: `arguments invalid: /service: value "API" does not match pattern "^[a-z-]+$"`,
		},
		{
			name: "nested through ref",
			args: `{"service":"api","env":"staging","config":{}}`,
			want: `arguments invalid: /config: missing property "region"`,
		},
		{
			name: "anyOf lists each alternative",
			args: `{"service":"api","env":"staging","target":"eu"}`,
			want: `arguments invalid: /target: value matches none of the allowed forms: must be integer, got string | minLength: got 2, want 3`,
		},
		{
			name: "violations sorted by pointer",
			args: `{"service":1,"env":"dev","replicas":0}`,
			want: `arguments invalid: /env: value must be one of "staging", "production"; /replicas: minimum: got 0, want 1; /service: must be string, got number`,
		},
		{name: "array", args: `[1,2]`, want: `arguments invalid: must be a JSON object, got array`},
		{name: "string", args: `"deploy api"`, want: `arguments invalid: must be a JSON object, got string`},
		{name: "null", args: `null`, want: `arguments invalid: must be a JSON object, got null`},
		{name: "number", args: `42`, want: `arguments invalid: must be a JSON object, got number`},
		{name: "empty", args: ``, want: `arguments invalid: empty, want a JSON object such as {}`},
		{name: "blank", args: " \n", want: `arguments invalid: empty, want a JSON object such as {}`},
		{name: "truncated", args: `{"service":"api"`, want: `arguments invalid: invalid JSON: unexpected end of JSON input`},
		{name: "not JSON", args: `service=api`, want: `arguments invalid: invalid JSON: invalid character 's' looking for beginning of value`},
		{name: "trailing data", args: `{"service":"api","env":"staging"} {}`, want: `arguments invalid: invalid JSON: invalid character '{' after top-level value`},
		{name: "duplicate key", args: `{"service":"api","env":"staging","env":"production"}`, want: `arguments invalid: duplicate object key "env" at /`},
		{name: "nested duplicate key", args: `{"service":"api","env":"staging","config":{"region":"a","region":"b"}}`, want: `arguments invalid: duplicate object key "region" at /config`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := s.Validate(json.RawMessage(tt.args))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate(%s) = %v, want nil", tt.args, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%s) = nil, want %q", tt.args, tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Validate(%s)\n got: %s\nwant: %s", tt.args, got, tt.want)
			}
			var ae *schema.ArgumentsError
			if !errors.As(err, &ae) {
				t.Errorf("Validate(%s) error is %T, want *schema.ArgumentsError", tt.args, err)
			}
		})
	}
}

func TestValidateViolationPointers(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "deploy", deploySchema)
	err := s.Validate(json.RawMessage(`{"env":"dev","config":{}}`))
	var ae *schema.ArgumentsError
	if !errors.As(err, &ae) {
		t.Fatalf("Validate error = %v (%T), want *schema.ArgumentsError", err, err)
	}
	var got []string
	for _, v := range ae.Violations {
		got = append(got, v.Pointer)
	}
	want := []string{"", "/config", "/env"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("pointers = %q, want %q", got, want)
	}
}

func TestValidateCapsViolations(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "strict", `{"type":"object","additionalProperties":{"type":"string"}}`)
	var b strings.Builder
	b.WriteString("{")
	for i := range 15 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + string(rune('a'+i)) + `":1`)
	}
	b.WriteString("}")
	err := s.Validate(json.RawMessage(b.String()))
	if err == nil {
		t.Fatal("Validate = nil, want an error")
	}
	msg := err.Error()
	if n := strings.Count(msg, "must be string, got number"); n != 10 {
		t.Errorf("message lists %d violations, want 10: %s", n, msg)
	}
	if !strings.HasSuffix(msg, "; and 5 more") {
		t.Errorf("message %q does not end with %q", msg, "; and 5 more")
	}
}

func TestValidatePointerEscaping(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "paths", `{"type":"object","properties":{"a/b~c":{"type":"string"}}}`)
	err := s.Validate(json.RawMessage(`{"a/b~c":1}`))
	want := `arguments invalid: /a~1b~0c: must be string, got number`
	if err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %s", err, want)
	}
}

func TestCompileEmptySchemaAcceptsAnyObject(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"", "  ", "{}"} {
		s, err := schema.Compile("any", json.RawMessage(src))
		if err != nil {
			t.Fatalf("Compile(%q): %v", src, err)
		}
		if err := s.Validate(json.RawMessage(`{"anything":[1,{"goes":null}]}`)); err != nil {
			t.Errorf("schema %q: Validate(object) = %v, want nil", src, err)
		}
		if err := s.Validate(json.RawMessage(`[]`)); err == nil {
			t.Errorf("schema %q: Validate([]) = nil, want an error", src)
		}
	}
	s, err := schema.Compile("nil", nil)
	if err != nil {
		t.Fatalf("Compile(nil): %v", err)
	}
	if err := s.Validate(json.RawMessage(`{}`)); err != nil {
		t.Errorf("nil schema: Validate({}) = %v", err)
	}
}

func TestCompileInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string
		want   []string // substrings of the error
	}{
		{"not JSON", `{"type":`, []string{`tool "bad": schema is invalid: invalid JSON`}},
		{"not an object", `[1]`, []string{`tool "bad": schema is invalid: must be a JSON object`}},
		{"unknown type", `{"type":"strin"}`, []string{`tool "bad": schema is invalid: at /type:`, `"string"`}},
		{"nested bad type", `{"properties":{"env":{"type":5}}}`, []string{`at /properties/env/type:`}},
		{"required not array", `{"required":"service"}`, []string{`at /required: must be array, got string`}},
		{"negative minLength", `{"properties":{"a":{"minLength":-1}}}`, []string{`at /properties/a/minLength:`}},
		{"bad regex", `{"properties":{"a":{"pattern":"("}}}`, []string{`at /properties/a/pattern:`, `not valid regex`}},
		{"dangling ref", `{"$ref":"#/$defs/nope"}`, []string{`#/$defs/nope`, `not found`}},
		{"external ref", `{"$ref":"other.json"}`, []string{`other.json`, `external $ref is not supported`}},
		{"file ref", `{"$ref":"file:///etc/passwd"}`, []string{`external $ref is not supported`}},
		{"duplicate key", `{"type":"object","type":"string"}`, []string{`duplicate object key "type"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := schema.Compile("bad", json.RawMessage(tt.schema))
			if err == nil {
				t.Fatalf("Compile(%s) = nil error", tt.schema)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Compile(%s) error %q does not contain %q", tt.schema, err, w)
				}
			}
			if strings.Contains(err.Error(), "mem:") {
				t.Errorf("Compile(%s) error %q leaks the internal schema URL", tt.schema, err)
			}
		})
	}
}

func TestCompileSchemaNameWithOddCharacters(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"deploy", "ns/deploy", "a b#c?d", "", "ünï"} {
		s, err := schema.Compile(name, json.RawMessage(`{"type":"object","required":["x"]}`))
		if err != nil {
			t.Fatalf("Compile(%q): %v", name, err)
		}
		if err := s.Validate(json.RawMessage(`{}`)); err == nil {
			t.Errorf("Compile(%q): Validate({}) = nil, want missing x", name)
		}
	}
}
