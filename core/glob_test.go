package core_test

import (
	"testing"

	"github.com/agentgate/agentgate/core"
)

func TestMatchTool(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		glob, name string
		want       bool
	}{
		{"delete_*", "delete_repo", true},
		{"*delete*", "github/delete_repo", true},
		{"*", "github/delete_repo", true},
		{"github/*", "github/delete_repo", true},
		{"gitlab/*", "github/delete_repo", false},
		{"get_?", "get_/", true},
		{"delete_*", "list_repos", false},
		{"[", "[", false}, // malformed: matches nothing
	} {
		if got := core.MatchTool(tt.glob, tt.name); got != tt.want {
			t.Errorf("MatchTool(%q, %q) = %v, want %v", tt.glob, tt.name, got, tt.want)
		}
	}
}
