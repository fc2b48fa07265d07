package core

import (
	"path"
	"strings"
)

// MatchTool reports whether tool name matches glob, in path.Match's syntax
// ("delete_*", "get_?", "[a-c]*") but with '*' and '?' matching '/' too:
// an MCP tool's name may hold it ("github/delete_repo"), and "*delete*"
// must name that tool as it names "delete_repo". A malformed glob matches
// nothing (config validation refuses it).
func MatchTool(glob, name string) bool {
	ok, _ := path.Match(strings.ReplaceAll(glob, "/", "\x00"), strings.ReplaceAll(name, "/", "\x00"))
	return ok
}
