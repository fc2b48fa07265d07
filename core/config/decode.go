package config

import (
	"bytes"
	"cmp"
	"encoding"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Load reads, expands and validates the file at path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(b, os.LookupEnv)
	var ce *Error
	if errors.As(err, &ce) {
		ce.File = path
	}
	return c, err
}

// Parse reads a file's bytes as YAML, expands ${VAR} references in its
// values (see Expand) with lookup, decodes it and validates the result.
// Problems carry the line they are on.
func Parse(b []byte, lookup func(string) (string, bool)) (*Config, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		p, lines := yamlProblems(err), bytes.Split(b, []byte("\n"))
		for i := range p {
			flow := strings.HasPrefix(p[i].Msg, "did not find expected ',' or")
			if flow && p[i].Line > 0 && p[i].Line <= len(lines) && bytes.Contains(lines[p[i].Line-1], []byte("${")) {
				p[i].Msg += ` (inside { } or [ ], quote a ${VAR} value: "${VAR}")`
			}
		}
		return nil, &Error{Problems: p}
	}
	var p []Problem
	add := func(n *yaml.Node, path, msg string) { p = append(p, Problem{Line: n.Line, Path: path, Msg: msg}) }
	expandNode(&doc, "", lookup, add)
	if len(doc.Content) > 0 {
		check(doc.Content[0], reflect.TypeFor[Config](), "", add)
	}
	if len(p) > 0 {
		slices.SortStableFunc(p, func(a, b Problem) int { return cmp.Compare(a.Line, b.Line) })
		return nil, &Error{Problems: p}
	}
	var c Config
	if len(doc.Content) > 0 {
		if err := doc.Decode(&c); err != nil {
			return nil, &Error{Problems: yamlProblems(err)}
		}
	}
	if err := c.validate(lookup); err != nil {
		var ce *Error
		if !errors.As(err, &ce) {
			return nil, err
		}
		p = ce.Problems
	}
	if n, _ := locate(&doc, "server.workers"); n != nil && c.Server.Workers == 0 && !isNull(n) {
		p = append(p, Problem{Path: "server.workers", Msg: workersRange(0)})
	}
	if len(p) > 0 {
		for i := range p {
			if p[i].Line == 0 && p[i].Path != "" {
				_, p[i].Line = locate(&doc, p[i].Path)
			}
		}
		return nil, &Error{Problems: p}
	}
	return &c, nil
}

// MaxWorkers is the largest accepted server.workers.
const MaxWorkers = 1024

func workersRange(got int) string {
	return fmt.Sprintf("must be from 1 to %d, got %d (leave it out for the default 8)", MaxWorkers, got)
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// yamlProblems turns a yaml.v3 error into problems with their lines.
func yamlProblems(err error) []Problem {
	var msgs []string
	if te := (*yaml.TypeError)(nil); errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	p := make([]Problem, 0, len(msgs))
	for _, m := range msgs {
		pr := Problem{Msg: m}
		if sub := yamlLine.FindStringSubmatch(m); sub != nil {
			pr.Line, _ = strconv.Atoi(sub[1])
			pr.Msg = m[len(sub[0]):]
			if strings.HasPrefix(pr.Msg, "did not find expected") {
				pr.Line++ // yaml.v3 counts lines from 0 in its parser's errors
			}
		}
		p = append(p, pr)
	}
	return p
}

var (
	durationType        = reflect.TypeFor[time.Duration]()
	unmarshalerType     = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// check walks n against t, the type it decodes into, and reports unknown
// fields and values of the wrong kind with their field paths (the
// decoder's own errors name only a line and a Go type). Aliases are left
// to the decoder.
func check(n *yaml.Node, t reflect.Type, path string, add func(n *yaml.Node, path, msg string)) {
	if n.Kind == yaml.AliasNode || isNull(n) {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) && (t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode) {
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			for _, p := range yamlProblems(err) {
				add(n, path, p.Msg)
			}
		}
		return
	}
	switch {
	case t == durationType:
		checkScalar(n, t, path, "a duration like 30s, 15m or 2h", add)
		return
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		checkScalar(n, t, path, "a text value", add)
		return
	}
	switch t.Kind() {
	case reflect.Interface:
	case reflect.Struct:
		fields, names := yamlFields(t)
		if n.Kind != yaml.MappingNode {
			add(n, path, fmt.Sprintf("want a mapping with the fields %s, got %s", strings.Join(names, ", "), describe(n)))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a merge key: the decoder checks what it merges
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				add(k, joinPath(path, k.Value), fmt.Sprintf("field %s not found (the fields here are %s)", k.Value, strings.Join(names, ", ")))
				continue
			}
			check(v, ft, joinPath(path, k.Value), add)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			add(n, path, "want a mapping of names to values, got "+describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			check(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value), add)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			add(n, path, "want a list like [a, b], got "+describe(n))
			return
		}
		for i, c := range n.Content {
			check(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), add)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		checkScalar(n, t, path, "a whole number", add)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		checkScalar(n, t, path, "a whole number, 0 or more", add)
	case reflect.Float32, reflect.Float64:
		checkScalar(n, t, path, "a number", add)
	case reflect.Bool:
		checkScalar(n, t, path, "true or false", add)
	default:
		checkScalar(n, t, path, "a text value", add)
	}
}

// checkScalar reports n unless it is a scalar that decodes into t.
func checkScalar(n *yaml.Node, t reflect.Type, path, want string, add func(n *yaml.Node, path, msg string)) {
	if n.Kind != yaml.ScalarNode || n.Decode(reflect.New(t).Interface()) != nil {
		add(n, path, fmt.Sprintf("want %s, got %s", want, describe(n)))
	}
}

// yamlFields returns the YAML names of struct t's fields and their types,
// and the names in declaration order.
func yamlFields(t reflect.Type) (map[string]reflect.Type, []string) {
	fields := map[string]reflect.Type{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Struct {
			inner, innerNames := yamlFields(f.Type)
			for k, v := range inner {
				fields[k] = v
			}
			names = append(names, innerNames...)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
		names = append(names, name)
	}
	return fields, names
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return strconv.Quote(n.Value)
}

// locate finds the node at a field path like agents.ops.tools[0] and the
// line it is written on; for a path that is not in the file, the line of
// the nearest enclosing field that is (0 when none is).
func locate(doc *yaml.Node, path string) (*yaml.Node, int) {
	if len(doc.Content) == 0 {
		return nil, 0
	}
	n, line := doc.Content[0], 0
	for _, part := range strings.Split(path, ".") {
		key, idx, _ := strings.Cut(part, "[")
		if n = mappingValue(n, key); n == nil {
			return nil, line
		}
		line = n.Line
		for idx != "" {
			var i string
			i, idx, _ = strings.Cut(idx, "]")
			idx = strings.TrimPrefix(idx, "[")
			k, err := strconv.Atoi(i)
			if n.Kind == yaml.AliasNode {
				n = n.Alias
			}
			if err != nil || n.Kind != yaml.SequenceNode || k < 0 || k >= len(n.Content) {
				return nil, line
			}
			n = n.Content[k]
			line = n.Line
		}
	}
	return n, line
}

// mappingValue returns the value of key in mapping n; its Line is set to
// the key's line, where the field is written.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := *n.Content[i+1]
			v.Line = n.Content[i].Line
			return &v
		}
	}
	return nil
}
