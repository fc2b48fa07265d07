package config

import (
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Expand replaces the environment references in one value using lookup:
//
//   - ${VAR} is VAR's value; an unset VAR is an error.
//   - ${VAR:-default} is default when VAR is unset or empty; ${VAR:-}
//     allows empty.
//   - $${ is a literal ${. Any other $ (like $HOME or $$) is kept as is.
//
// The result is used verbatim: it is never read as YAML again.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	out, problems := expand(s, lookup)
	if len(problems) > 0 {
		return out, errors.New(strings.Join(problems, "; "))
	}
	return out, nil
}

// expand is Expand returning every problem of s.
func expand(s string, lookup func(string) (string, bool)) (string, []string) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	var problems []string
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '$')
		if j < 0 {
			b.WriteString(s[i:])
			break
		}
		b.WriteString(s[i : i+j])
		i += j
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(rest, "${"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				problems = append(problems, fmt.Sprintf("%s has no closing }: write ${NAME} or ${NAME:-default}, or $${ for a literal ${", clip(rest)))
				b.WriteString(rest)
				i = len(s)
				continue
			}
			ref := rest[:end+1]
			name, def, hasDef := strings.Cut(rest[2:end], ":-")
			switch v, ok := lookup(name); {
			case !isVarName(name):
				problems = append(problems, fmt.Sprintf("%s is not a variable reference: write ${NAME} or ${NAME:-default} (NAME: letters, digits and _), or $${ for a literal ${", clip(ref)))
				b.WriteString(ref)
			case strings.Contains(def, "${"):
				problems = append(problems, fmt.Sprintf("%s: a default cannot hold another ${...}", clip(ref)))
				b.WriteString(ref)
			case ok && (v != "" || !hasDef):
				b.WriteString(v)
			case hasDef:
				b.WriteString(def)
			default:
				problems = append(problems, fmt.Sprintf("${%s} is not set (set it, or write ${%s:-default})", name, name))
			}
			i += end + 1
		default:
			b.WriteByte('$')
			i++
		}
	}
	return b.String(), problems
}

func isVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// clip shortens a quoted piece of the file for a message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// expandNode expands the scalar values under n, never the keys, calling
// add for each problem. A plain (unquoted) value is typed again from its
// new text, so `workers: ${WORKERS}` reads a number and an empty value
// reads as unset; a quoted value stays a string.
func expandNode(n *yaml.Node, path string, lookup func(string) (string, bool), add func(n *yaml.Node, path, msg string)) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			expandNode(c, path, lookup, add)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			expandNode(n.Content[i+1], joinPath(path, n.Content[i].Value), lookup, add)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			expandNode(c, fmt.Sprintf("%s[%d]", path, i), lookup, add)
		}
	case yaml.ScalarNode:
		// Aliases are skipped: their anchor is expanded where it is defined.
		if !strings.Contains(n.Value, "${") {
			return
		}
		v, problems := expand(n.Value, lookup)
		for _, p := range problems {
			add(n, path, p)
		}
		n.Value = v
		if n.Style == 0 {
			n.Tag = plainTag(v)
		}
	}
}

// plainTag is the tag of an expanded plain value: "" lets the decoder type
// it (a number, a bool, or null when empty), but text that YAML would read
// as null stays a string.
func plainTag(v string) string {
	switch v {
	case "~", "null", "Null", "NULL":
		return "!!str"
	}
	return ""
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
