package core

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzReadResult feeds read_result and search_result arbitrary arguments
// (they come from a model) over an arbitrary result: no panic, and an
// answer is never longer than what the model may be shown whole.
func FuzzReadResult(f *testing.F) {
	f.Add(`{"handle":"c1","offset":50,"length":10}`, "hello world, a long result", 16)
	f.Add(`{"handle":"c1","query":"ö"}`, "ÖÖ straße ǅ İi", 8)
	f.Add(`{"handle":"c1","offset":-3}`, "x", 2)
	f.Add(`{"handle":"c1","offset":1e99}`, "x", 2)
	f.Add(`{"handle":"nope"}`, "x", 2)
	f.Add(`[1,2]`, "", 0)
	f.Fuzz(func(t *testing.T, args, content string, limit int) {
		if limit <= 0 || limit > 100_000 {
			limit = DefaultLargeResultChars
		}
		results := map[string]ToolResult{"c1": {ToolCallID: "c1", Tool: "t", Content: content}}
		for _, name := range []string{ToolReadResult, ToolSearchResult} {
			out := readResult(results, ToolCall{ID: "x", Name: name, Arguments: json.RawMessage(args)}, limit)
			if name == ToolReadResult && !strings.HasPrefix(out, "error: ") {
				body := out[strings.IndexByte(out, '\n')+1:]
				if n := utf8.RuneCountInString(body); n > readMax(limit) {
					t.Fatalf("read_result answered %d characters, more than %d", n, readMax(limit))
				}
			}
		}
		if utf8.ValidString(content) {
			shown, large := shownResult(results["c1"], limit)
			if large && !strings.Contains(shown, `"c1"`) {
				t.Fatalf("a shortened result does not name its handle: %q", shown)
			}
		}
	})
}
