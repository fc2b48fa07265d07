// Package schema validates tool-call arguments against a tool's JSON Schema
// and computes the canonical form and hash of arguments that approvals bind
// to.
//
// Schemas are compiled with github.com/santhosh-tekuri/jsonschema/v6; a
// schema without "$schema" is read as draft 2020-12. "format" is an
// annotation, not an assertion (the 2020-12 default). A $ref may only point
// inside the schema itself (for example "#/$defs/env"): nothing is loaded
// from files or the network.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// maxViolations caps how many violations an error lists; the rest are
// counted. The model fixes the first ones and tries again.
const maxViolations = 10

// Schema is a compiled JSON Schema for one tool's arguments. It is safe for
// concurrent use.
type Schema struct {
	name string
	sch  *jsonschema.Schema
}

// Compile compiles the JSON Schema of the tool called name. An empty or nil
// schema accepts any JSON object. The error says which part of the schema is
// wrong, as a JSON pointer into the schema.
func Compile(name string, schema json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	doc, err := decode(schema)
	if err != nil {
		return nil, fmt.Errorf("tool %q: schema is invalid: %w", name, err)
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("tool %q: schema is invalid: must be a JSON object (or true/false)", name)
	}
	loc := baseURL + url.PathEscape(name) + ".json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("tool %q: schema: %w", name, err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("tool %q: schema is invalid: %s", name, compileMessage(err, loc))
	}
	return &Schema{name: name, sch: sch}, nil
}

// Validate checks tool-call arguments: they must be one JSON object, with no
// duplicate keys, that satisfies the schema. Any failure is an
// *ArgumentsError whose message is meant to be shown to the model.
func (s *Schema) Validate(args json.RawMessage) error {
	if len(bytes.TrimSpace(args)) == 0 {
		return &ArgumentsError{Violations: []Violation{{Message: "empty, want a JSON object such as {}"}}}
	}
	v, err := decode(args)
	if err != nil {
		return &ArgumentsError{Violations: []Violation{{Message: err.Error()}}}
	}
	if _, ok := v.(map[string]any); !ok {
		return &ArgumentsError{Violations: []Violation{{Message: "must be a JSON object, got " + jsonType(v)}}}
	}
	if vs := outOfRange(v, ""); len(vs) > 0 {
		return &ArgumentsError{Violations: vs}
	}
	err = s.sch.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("validate arguments of tool %q: %w", s.name, err)
	}
	return &ArgumentsError{Violations: violations(ve)}
}

// maxNumberScale bounds the digits after the point and the exponent of a
// number in the arguments. The validator works on exact rationals: a number
// such as 1e9999999 does not fit one (the validator then crashes), and one
// near that limit takes it a long time.
const maxNumberScale = 1000

// outOfRange lists the numbers in v (at ptr) beyond maxNumberScale.
func outOfRange(v any, ptr string) []Violation {
	switch v := v.(type) {
	case json.Number:
		if !numberInRange(string(v)) {
			return []Violation{{ptr, fmt.Sprintf("number out of range: use at most %d digits after the point and an exponent within ±%d", maxNumberScale, maxNumberScale)}}
		}
	case []any:
		var out []Violation
		for i, e := range v {
			out = append(out, outOfRange(e, ptr+"/"+strconv.Itoa(i))...)
		}
		return out
	case map[string]any:
		var out []Violation
		for k, e := range v {
			out = append(out, outOfRange(e, ptr+"/"+escapePointer(k))...)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Pointer < out[j].Pointer })
		return out
	}
	return nil
}

// numberInRange reports whether the JSON number n has at most
// maxNumberScale digits after the point and an exponent within
// ±maxNumberScale.
func numberInRange(n string) bool {
	mant, exp, hasExp := strings.Cut(strings.ToLower(n), "e")
	if _, frac, ok := strings.Cut(mant, "."); ok && len(frac) > maxNumberScale {
		return false
	}
	if !hasExp {
		return true
	}
	e, err := strconv.Atoi(exp)
	return err == nil && e >= -maxNumberScale && e <= maxNumberScale
}

// Violation is one way the arguments break the schema.
type Violation struct {
	// Pointer is the JSON pointer (RFC 6901) of the offending value, "" for
	// the arguments object itself.
	Pointer string
	// Message says what is wrong, in words a model can act on.
	Message string
}

func (v Violation) String() string {
	if v.Pointer == "" {
		return v.Message
	}
	return v.Pointer + ": " + v.Message
}

// ArgumentsError reports arguments that are not a JSON object or break the
// tool's schema. Its message is short and lists each violation with its JSON
// pointer, e.g.
//
//	arguments invalid: missing property "service"; /env: value must be one of "staging", "production"
//
// Violations are sorted by pointer; at most 10 are listed.
type ArgumentsError struct {
	Violations []Violation
}

func (e *ArgumentsError) Error() string {
	var sb strings.Builder
	sb.WriteString("arguments invalid: ")
	for i, v := range e.Violations {
		if i == maxViolations {
			fmt.Fprintf(&sb, "; and %d more", len(e.Violations)-maxViolations)
			break
		}
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(v.String())
	}
	return sb.String()
}

// noLoader refuses every external reference.
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, errors.New("external $ref is not supported; inline the schema or use \"#/$defs/...\"")
}

var printer = message.NewPrinter(language.English)

// baseURL is where compiled schemas live inside the compiler; it never
// leaves this package.
const baseURL = "mem:///tools/"

// compileMessage renders a compile error without the internal resource URL.
func compileMessage(err error, loc string) string {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		prefix := ""
		if _, frag, ok := strings.Cut(sve.URL, "#"); ok {
			if p, err := url.PathUnescape(frag); err == nil {
				prefix = p
			}
		}
		var parts []string
		for _, v := range violations(ve) {
			v.Pointer = prefix + v.Pointer
			if v.Pointer == "" {
				v.Pointer = "/"
			}
			parts = append(parts, "at "+v.String())
		}
		return strings.Join(parts, "; ")
	}
	msg := err.Error()
	msg = strings.ReplaceAll(msg, strconv.Quote(loc+"#"), `"#`)
	msg = strings.ReplaceAll(msg, strconv.Quote(loc), `"#"`)
	msg = strings.ReplaceAll(msg, loc, "")
	return strings.ReplaceAll(msg, baseURL, "")
}

// violations flattens a validation error tree into its leaves, sorted by
// pointer and deduplicated.
func violations(ve *jsonschema.ValidationError) []Violation {
	var out []Violation
	collect(ve, &out)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Pointer != out[j].Pointer {
			return out[i].Pointer < out[j].Pointer
		}
		return out[i].Message < out[j].Message
	})
	dedup := out[:0]
	for i, v := range out {
		if i > 0 && v == out[i-1] {
			continue
		}
		dedup = append(dedup, v)
	}
	return dedup
}

func collect(e *jsonschema.ValidationError, out *[]Violation) {
	ptr := pointer(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		if o, ok := k.(*kind.OneOf); ok && len(o.Subschemas) > 1 {
			*out = append(*out, Violation{ptr, fmt.Sprintf("value matches more than one allowed form (oneOf %d and %d), it must match exactly one", o.Subschemas[0], o.Subschemas[1])})
			return
		}
		// Listing every alternative's failures as if all applied would
		// mislead; say what each alternative wanted instead.
		var alts []string
		for _, c := range e.Causes {
			var sub []Violation
			collect(c, &sub)
			var s []string
			for _, v := range sub {
				if v.Pointer == ptr {
					s = append(s, v.Message)
				} else {
					s = append(s, v.String())
				}
			}
			alts = append(alts, strings.Join(s, ", "))
		}
		msg := "value matches none of the allowed forms"
		if len(alts) > 0 {
			msg += ": " + strings.Join(alts, " | ")
		}
		*out = append(*out, Violation{ptr, msg})
		return
	}
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			collect(c, out)
		}
		return
	}
	*out = append(*out, Violation{ptr, kindMessage(e.ErrorKind)})
}

// kindMessage words the common violations with JSON (double) quotes, which
// a model reads as the literal values to send; the rest use the library's
// English text.
func kindMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Required:
		if len(k.Missing) == 1 {
			return "missing property " + strconv.Quote(k.Missing[0])
		}
		return "missing properties " + quoteAll(k.Missing)
	case *kind.AdditionalProperties:
		if len(k.Properties) == 1 {
			return "property " + strconv.Quote(k.Properties[0]) + " is not allowed"
		}
		props := slices.Sorted(slices.Values(k.Properties)) // found in map order
		return "properties " + quoteAll(props) + " are not allowed"
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = literal(w)
		}
		if len(want) == 1 {
			return "value must be " + want[0]
		}
		return "value must be one of " + strings.Join(want, ", ")
	case *kind.Const:
		return "value must be " + literal(k.Want)
	case *kind.Type:
		return "must be " + strings.Join(k.Want, " or ") + ", got " + k.Got
	case *kind.Pattern:
		return "value " + strconv.Quote(k.Got) + " does not match pattern " + strconv.Quote(k.Want)
	case *kind.FalseSchema:
		return "value is not allowed here"
	case *kind.DependentRequired:
		return "properties " + quoteAll(k.Missing) + " are required when " + strconv.Quote(k.Prop) + " is present"
	}
	return k.LocalizedString(printer)
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// literal renders a schema value as compact JSON, shortened if long.
func literal(v any) string {
	b, err := encode(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	const max = 80
	if r := []rune(string(b)); len(r) > max {
		return string(r[:max]) + "…"
	}
	return string(b)
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

func pointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		sb.WriteString(escapePointer(t))
	}
	return sb.String()
}

func escapePointer(tok string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
}

func pointerOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}
