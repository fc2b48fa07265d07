package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// APIKey is one bearer key of the API, MCP and CLI (server.api_keys). A
// bare string in the list is an admin key named after its hash.
type APIKey struct {
	// Name identifies the key in decisions and the audit log (key:<name>).
	Name string `yaml:"name"`
	// Key is the secret itself (usually ${VAR}); KeyEnv names the
	// environment variable holding it instead. Exactly one is set.
	Key    string `yaml:"key"`
	KeyEnv string `yaml:"key_env"`
	// Role: viewer, operator, approver or admin. Default viewer.
	Role string `yaml:"role"`
	// Agents limits the key to these agents; empty = all.
	Agents []string `yaml:"agents"`

	bare bool // written as a bare string
}

// UnmarshalYAML accepts {name, key|key_env, role, agents} or a bare key.
func (k *APIKey) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*k = APIKey{Key: n.Value, Role: "admin", bare: true}
		return nil
	}
	type plain APIKey
	var p plain
	if err := decodeStrict(n, &p); err != nil {
		return err
	}
	*k = APIKey(p)
	return nil
}

// Bare reports whether the key was written as a bare string (an admin key
// without a name).
func (k APIKey) Bare() bool { return k.bare }

// decodeStrict decodes n refusing unknown fields (yaml.v3 applies
// KnownFields only to the top-level decoder).
func decodeStrict(n *yaml.Node, v any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// Person links one person's platform ids and API keys, so approvers and
// the audit can name them once (people.<name>).
type Person struct {
	// Slack user ids: U123 (any workspace) or T1/U123.
	Slack StringList `yaml:"slack"`
	// Discord user ids (snowflakes).
	Discord StringList `yaml:"discord"`
	// Telegram user ids.
	Telegram StringList `yaml:"telegram"`
	// Keys are names of server.api_keys.
	Keys []string `yaml:"keys"`
}

// StringList is a YAML string or list of strings (numbers read as their text).
type StringList []string

// UnmarshalYAML accepts one scalar or a list of scalars.
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = StringList{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(StringList, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: expected an id, got a %s", c.Line, kindName(c.Kind))
			}
			out = append(out, c.Value)
		}
		*l = out
		return nil
	}
	return fmt.Errorf("line %d: expected an id or a list of ids, got a %s", n.Line, kindName(n.Kind))
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

// Roles of API keys, weakest first (the approvals package gives them meaning).
var Roles = []string{"viewer", "operator", "approver", "admin"}

var keyNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// MinKeyLen is the shortest accepted API key.
const MinKeyLen = 16

// validateKeys checks server.api_keys (with lookup for key_env) and people.
// placeholders are the example keys the documentation shows: a gateway
// that took one would open its API to anyone who read them.
var placeholders = []string{"agentgate-dev-key-change-me", "change-me-to-16-chars-or-more"}

// Placeholder reports whether key is an example key of the documentation.
func Placeholder(key string) bool { return slices.Contains(placeholders, key) }

func (c *Config) validateKeys(lookup func(string) (string, bool)) []string {
	var p []string
	add := func(path, format string, args ...any) { p = append(p, path+": "+fmt.Sprintf(format, args...)) }
	names := map[string]bool{}
	for i := range c.Server.APIKeys {
		k := &c.Server.APIKeys[i]
		path := fmt.Sprintf("server.api_keys[%d]", i)
		if !k.bare {
			switch {
			case k.Name == "":
				add(path+".name", "required: a name for the key, e.g. ci-bot (decisions and the audit log show key:<name>)")
			case !keyNamePattern.MatchString(k.Name):
				add(path+".name", "use letters, digits, _ . and - (at most 64), got %q", k.Name)
			case names[k.Name]:
				add(path+".name", "key name %q is used twice", k.Name)
			}
			names[k.Name] = true
			switch {
			case k.Key != "" && k.KeyEnv != "":
				add(path, "set only one of key and key_env")
			case k.KeyEnv != "":
				v, ok := lookup(k.KeyEnv)
				if !ok || v == "" {
					add(path+".key_env", "environment variable %s is not set", k.KeyEnv)
				}
				k.Key = v
			case k.Key == "":
				add(path, "set key (e.g. ${CI_KEY}) or key_env (the environment variable holding it)")
			}
			if k.Role == "" {
				k.Role = "viewer"
			}
			if !slices.Contains(Roles, k.Role) {
				add(path+".role", "unknown role %q (one of %s)", k.Role, strings.Join(Roles, ", "))
			}
			for j, a := range k.Agents {
				if _, ok := c.Agents[a]; !ok {
					add(fmt.Sprintf("%s.agents[%d]", path, j), "unknown agent %q", a)
				}
			}
		}
		switch {
		case (k.Key != "" || k.bare) && len(k.Key) < MinKeyLen:
			// A bare "" is a variable set to nothing: no caller could
			// present it, yet the gateway would count itself keyed.
			add(path, "must be at least %d characters", MinKeyLen)
		case Placeholder(k.Key):
			add(path, "is the placeholder from the documentation, which anyone can read; make your own with openssl rand -hex 24")
		}
	}
	for _, name := range sortedKeys(c.People) {
		path := "people." + name
		if !idPattern.MatchString(name) {
			add(path, "person names use lowercase letters, digits, _ and - (at most 64)")
		}
		if slices.Contains([]string{"requester"}, name) {
			add(path, "%q is reserved in approvers; pick another name", name)
		}
		for i, k := range c.People[name].Keys {
			if !names[k] {
				add(fmt.Sprintf("%s.keys[%d]", path, i), "no key named %q in server.api_keys", k)
			}
		}
		for i, id := range c.People[name].Telegram {
			if !isDigits(id) {
				add(fmt.Sprintf("%s.telegram[%d]", path, i), "a Telegram user id is a number, got %q", id)
			}
		}
		for i, id := range c.People[name].Discord {
			if !isDigits(id) {
				add(fmt.Sprintf("%s.discord[%d]", path, i), "a Discord user id is a number, got %q", id)
			}
		}
		for i, id := range c.People[name].Slack {
			if id == "" || strings.ContainsAny(id, " :") {
				add(fmt.Sprintf("%s.slack[%d]", path, i), "a Slack user id looks like U0123ABC or T0123/U0123ABC, got %q", id)
			}
		}
	}
	// A bare approver or caller is a person or a platform user id; one that
	// is only a key's name would never match the key (key:<name> does).
	bareKey := func(path string, ids []string) {
		for i, id := range ids {
			if _, person := c.People[id]; names[id] && !person {
				add(fmt.Sprintf("%s[%d]", path, i), "%q is the name of an API key; write key:%s to name the key", id, id)
			}
		}
	}
	for _, name := range sortedKeys(c.Tools) {
		bareKey("tools."+name+".approval.approvers", c.Tools[name].Approval.Approvers)
	}
	for _, name := range sortedKeys(c.Routines) {
		bareKey("routines."+name+".callers", c.Routines[name].Callers)
	}
	return p
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
