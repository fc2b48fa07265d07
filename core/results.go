package core

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A tool result longer than the agent's limit (Agent.LargeResultChars) is
// journaled whole but shown to the model as a preview and a handle; the
// built-in tools read_result and search_result, offered to the model once a
// run has such a result, read it by range or find text in it. The handle is
// the tool call's id, so it resolves only within the run.
const (
	ToolReadResult   = "read_result"
	ToolSearchResult = "search_result"

	// DefaultLargeResultChars is the default limit of a tool result shown
	// whole to the model.
	DefaultLargeResultChars = 16_000
	previewChars            = 1_000
	searchMatches           = 20
	searchContext           = 120
)

var resultToolSpecs = []ToolSpec{
	{
		Name:        ToolReadResult,
		Description: "Read part of a tool result that was too long to show whole. Give its handle, the character offset to start at (0 = the start) and how many characters to read.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"handle":{"type":"string","description":"the handle named in the shortened result"},"offset":{"type":"integer","minimum":0,"description":"first character to read, 0-based"},"length":{"type":"integer","minimum":1,"description":"how many characters to read"}},"required":["handle"],"additionalProperties":false}`),
	},
	{
		Name:        ToolSearchResult,
		Description: "Find text in a tool result that was too long to show whole. Answers each match's character offset with the text around it; read more with read_result.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"handle":{"type":"string","description":"the handle named in the shortened result"},"query":{"type":"string","minLength":1,"description":"the text to find (case-insensitive)"}},"required":["handle","query"],"additionalProperties":false}`),
	},
}

// largeResultChars is the longest tool result the model sees whole; 0 means
// no limit.
func (a *Agent) largeResultChars() int {
	switch {
	case a.LargeResultChars < 0:
		return 0
	case a.LargeResultChars == 0:
		return DefaultLargeResultChars
	}
	return a.LargeResultChars
}

// shownResult is what the model sees of a tool result: the content, or a
// preview and the handle when it is longer than limit characters.
func shownResult(t ToolResult, limit int) (content string, large bool) {
	n := utf8.RuneCountInString(t.Content)
	if limit <= 0 || n <= limit {
		return t.Content, false
	}
	preview := runes(t.Content, 0, min(previewChars, limit/2))
	return fmt.Sprintf("[The result of %s is %d characters, too long to show whole. Its handle is %q. "+
		"Read parts of it with %s (handle, offset, length; at most %d characters at a time) or find text in it with %s (handle, query). "+
		"It begins:]\n%s", t.Tool, n, t.ToolCallID, ToolReadResult, readMax(limit), ToolSearchResult, preview), true
}

// readMax is the most read_result answers at once: half the limit, so its
// own answer is always shown whole.
func readMax(limit int) int { return max(limit/2, 1) }

// resultTool answers a read_result or search_result call from the run's
// journaled results; ok is false for any other tool name.
func (r *runner) resultTool(call ToolCall) (res ToolResult, ok bool) {
	limit := r.agent.largeResultChars()
	if limit == 0 || (call.Name != ToolReadResult && call.Name != ToolSearchResult) {
		return res, false
	}
	if _, own := r.agent.Tool(call.Name); own {
		return res, false // the agent has a tool of that name: it wins
	}
	content := readResult(r.state.results, call, limit)
	return ToolResult{ToolCallID: call.ID, Tool: call.Name, Content: content, IsError: strings.HasPrefix(content, "error: ")}, true
}

// readResult answers a read_result or search_result call.
func readResult(results map[string]ToolResult, call ToolCall, limit int) string {
	var a struct {
		Handle string `json:"handle"`
		Offset int    `json:"offset"`
		Length int    `json:"length"`
		Query  string `json:"query"`
	}
	if err := json.Unmarshal(call.Arguments, &a); err != nil {
		return "error: the arguments must be a JSON object with a handle: " + err.Error()
	}
	res, found := results[a.Handle]
	if !found {
		return fmt.Sprintf("error: there is no result with handle %q in this run; use the handle named in the shortened result", a.Handle)
	}
	if call.Name == ToolSearchResult {
		return searchResult(res.Content, a.Query)
	}
	total := utf8.RuneCountInString(res.Content)
	if a.Length <= 0 || a.Length > readMax(limit) {
		a.Length = readMax(limit)
	}
	if a.Offset < 0 || a.Offset >= total {
		return fmt.Sprintf("error: offset %d is outside the result, which has %d characters (offsets 0 to %d)", a.Offset, total, total-1)
	}
	part := runes(res.Content, a.Offset, a.Length)
	end := a.Offset + utf8.RuneCountInString(part)
	return fmt.Sprintf("[characters %d to %d of %d]\n%s", a.Offset, end, total, part)
}

// searchResult lists where query occurs in content (case-insensitive), by
// character offset, with the text around each match.
func searchResult(content, query string) string {
	if strings.TrimSpace(query) == "" {
		return "error: query must not be empty"
	}
	text := []rune(content)
	lower, q := foldRunes(text), foldRunes([]rune(query))
	var b strings.Builder
	found := 0
	for i := 0; i+len(q) <= len(lower); i++ {
		if !equalRunes(lower[i:i+len(q)], q) {
			continue
		}
		found++
		if found <= searchMatches {
			lo, hi := max(i-searchContext, 0), min(i+len(q)+searchContext, len(text))
			fmt.Fprintf(&b, "\n[offset %d] …%s…", i, string(text[lo:hi]))
		}
		i += len(q) - 1
	}
	switch {
	case found == 0:
		return fmt.Sprintf("no match for %q", query)
	case found > searchMatches:
		return fmt.Sprintf("%d matches for %q; the first %d:%s", found, query, searchMatches, b.String())
	}
	return fmt.Sprintf("%d matches for %q:%s", found, query, b.String())
}

// foldRunes lowers each character on its own, keeping offsets.
func foldRunes(rs []rune) []rune {
	out := make([]rune, len(rs))
	for i, r := range rs {
		out[i] = unicode.ToLower(r)
	}
	return out
}

func equalRunes(a, b []rune) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// runes returns up to n characters of s starting at character off.
func runes(s string, off, n int) string {
	i := 0
	start, end := len(s), len(s)
	for pos := range s {
		if i == off {
			start = pos
		}
		if i == off+n {
			end = pos
			break
		}
		i++
	}
	if start > end {
		return ""
	}
	return s[start:end]
}
