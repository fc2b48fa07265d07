package redishub_test

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/hub/hubtest"
	"github.com/agentgate/agentgate/core/hub/redishub"
)

func TestBridge(t *testing.T) {
	url := os.Getenv("AGENTGATE_TEST_REDIS_URL")
	if url == "" {
		t.Skip("AGENTGATE_TEST_REDIS_URL is unset (e.g. redis://127.0.0.1:6379/0); skipping the Redis hub test")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(opt)
	t.Cleanup(func() { admin.Close() })
	log := slog.New(slog.DiscardHandler)
	hubtest.Run(t, func(t *testing.T) hubtest.Join {
		prefix := core.NewID("test")
		return func(t *testing.T, hub *core.Hub) hubtest.Bridge {
			// Each replica has a client of its own whose connections carry
			// its name, so Cut finds them and no one else's.
			o := *opt
			o.ClientName = core.NewID("redishub")
			c := redis.NewClient(&o)
			t.Cleanup(func() { c.Close() })
			return hubtest.Bridge{
				Run: redishub.Bridge(c, prefix, hub, log),
				Cut: func() int { return kill(t, admin, o.ClientName) },
			}
		}
	})
}

// kill closes every connection named name on the server and returns how many
// it closed.
func kill(t *testing.T, admin *redis.Client, name string) int {
	t.Helper()
	list, err := admin.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	var n int
	for line := range strings.Lines(list) {
		var id, named string
		for f := range strings.FieldsSeq(line) {
			if v, ok := strings.CutPrefix(f, "id="); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(f, "name="); ok {
				named = v
			}
		}
		if named != name {
			continue
		}
		if _, err := strconv.ParseUint(id, 10, 64); err != nil {
			t.Fatalf("CLIENT LIST: connection %q has no id", line)
		}
		killed, err := admin.ClientKillByFilter(t.Context(), "ID", id).Result()
		if err != nil {
			t.Fatalf("CLIENT KILL ID %s: %v", id, err)
		}
		n += int(killed)
	}
	return n
}
