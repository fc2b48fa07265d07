package config

import (
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/agentgate/agentgate/core"
)

// MCPServer is an MCP server whose tools agents may call
// (mcp_servers.<name>; agents.<id>.mcp_servers names it). It is started when
// an agent first needs its tools, restarted when it dies, and its tool list
// is cached until the server says it changed.
//
// Each of its tools waits for approval as Tools (per tool) or Approval (the
// server's default) say; without either, a tool waits for approval unless
// the server marks it read-only (readOnlyHint).
type MCPServer struct {
	// Command starts a server that speaks MCP on its stdin and stdout,
	// with Args, in Dir. It gets PATH and HOME from the gateway's
	// environment and Env, nothing else.
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	Dir     string            `yaml:"dir"`
	// URL of a server reached over streamable HTTP, sent Headers (e.g.
	// Authorization). Set Command or URL, not both.
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Allow lists the tools agents may use (globs: get_*, *); empty = all.
	// Deny removes tools from that, and wins.
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
	// Timeout of one tool call. Default 60s.
	Timeout time.Duration `yaml:"timeout"`
	// Approval applies to every tool not listed in Tools.
	Approval *Approval `yaml:"approval"`
	// Tools sets the approval of single tools, by name or glob (delete_*).
	Tools map[string]MCPTool `yaml:"tools"`
}

// MCPTool holds the settings of one tool of an MCP server.
type MCPTool struct {
	Approval Approval `yaml:"approval"`
}

// ToolApproval is the approval of the server's tool name, which the server
// marks read-only or not.
func (s MCPServer) ToolApproval(name string, readOnly bool) Approval {
	if t, ok := s.Tools[name]; ok {
		return t.Approval
	}
	// Globs next: of several that match, one that asks for approval wins;
	// of those that ask, the most specific (most characters that are not
	// wildcards) says who decides, with every one's exclude_requester and
	// the shortest timeout: a broad "*" does not undo what "delete_*" asks.
	var match *Approval
	best := -1
	for _, g := range sortedKeys(s.Tools) {
		if !strings.ContainsAny(g, "*?[") || !core.MatchTool(g, name) {
			continue
		}
		a := s.Tools[g].Approval
		switch {
		case match == nil || a.Required && !match.Required:
			match, best = &a, literals(g)
		case a.Required && match.Required:
			merged := *match
			if n := literals(g); n > best {
				merged.Approvers, best = a.Approvers, n
			}
			merged.ExcludeRequester = merged.ExcludeRequester || a.ExcludeRequester
			if a.Timeout > 0 && (merged.Timeout == 0 || a.Timeout < merged.Timeout) {
				merged.Timeout = a.Timeout
			}
			match = &merged
		}
	}
	if match != nil {
		return *match
	}
	if s.Approval != nil {
		return *s.Approval
	}
	return Approval{Required: !readOnly}
}

// literals counts the characters of glob g that are not wildcards.
func literals(g string) int {
	return len(g) - strings.Count(g, "*") - strings.Count(g, "?")
}

func (c *Config) validateMCP() []string {
	var p []string
	add := func(path, format string, args ...any) {
		p = append(p, path+": "+fmt.Sprintf(format, args...))
	}
	for _, name := range sortedKeys(c.MCPServers) {
		s := c.MCPServers[name]
		at := "mcp_servers." + name
		if !idPattern.MatchString(name) {
			add(at, "MCP server names use lowercase letters, digits, _ and - (at most 64)")
		}
		switch {
		case s.Command == "" && s.URL == "":
			add(at, "set command (a program speaking MCP on stdio) or url (a streamable HTTP endpoint)")
		case s.Command != "" && s.URL != "":
			add(at, "set only one of command and url")
		case s.URL != "":
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				add(at+".url", "must be an absolute http(s) URL, got %q", s.URL)
			}
			if len(s.Args) > 0 || len(s.Env) > 0 || s.Dir != "" {
				add(at, "args, env and dir are for a command; a url server takes headers")
			}
		default:
			if len(s.Headers) > 0 {
				add(at+".headers", "headers are for a url server; a command server takes env")
			}
		}
		for _, l := range []struct {
			field string
			globs []string
		}{{"allow", s.Allow}, {"deny", s.Deny}} {
			for i, g := range l.globs {
				if _, err := path.Match(g, ""); err != nil || strings.TrimSpace(g) == "" {
					add(fmt.Sprintf("%s.%s[%d]", at, l.field, i), "%q is not a tool name or glob (like get_* or *)", g)
				}
			}
		}
		if s.Timeout < 0 {
			add(at+".timeout", "must be positive, like 60s")
		}
		if s.Approval != nil {
			validateApproval(add, at+".approval", *s.Approval)
		}
		for _, tn := range sortedKeys(s.Tools) {
			if _, err := path.Match(tn, ""); err != nil || strings.TrimSpace(tn) == "" {
				add(at+".tools."+tn, "%q is not a tool name or glob (like delete_* or *)", tn)
			}
			validateApproval(add, at+".tools."+tn+".approval", s.Tools[tn].Approval)
		}
	}
	return p
}
