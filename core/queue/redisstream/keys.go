package redisstream

import (
	"fmt"
	"strings"
)

// keys are the Redis keys of one queue. They are built here and nowhere
// else. Every key carries the prefix as a hash tag ("agentgate:{<prefix>}:…")
// so all keys of one queue live in one cluster slot and a Lua script may
// touch them together.
type keys struct {
	// stream holds one entry per job that is due (waiting for a consumer) or
	// delivered (in the consumer group's PEL). Entry fields: job=<job id>.
	// Entries are deleted as soon as their delivery is settled.
	stream string
	// jobs maps job id → JSON record (see record) for every job that is not
	// yet acked or dead: delayed, due and leased ones. HLEN is the depth.
	jobs string
	// delayed is a sorted set of jobs not yet due, scored by due time (unix
	// ms by the queue's clock). Members are "<seq>:<job id>" with a
	// zero-padded sequence so equal due times keep enqueue order.
	delayed string
	// leases is a sorted set of delivered jobs, member job id, scored by lease
	// expiry (unix ms by the queue's clock).
	leases string
	// coalesce maps a job Key → the id of a job with that key that waits
	// undelivered (a hint: it is checked against the job record on use).
	coalesce string
	// dead is the dead-letter stream; entry fields: job=<JSON record>.
	dead string
	// seq is the counter behind the delayed set's tie-break sequence.
	seq string
}

// newKeys returns the keys of the queue named prefix.
func newKeys(prefix string) keys {
	base := "agentgate:{" + prefix + "}:"
	return keys{
		stream:   base + "stream",
		jobs:     base + "jobs",
		delayed:  base + "delayed",
		leases:   base + "leases",
		coalesce: base + "keys",
		dead:     base + "dead",
		seq:      base + "seq",
	}
}

// script lists the keys in the order every Lua script declares them
// (KEYS[1..7]; see scriptPrelude).
func (k keys) script() []string {
	return []string{k.stream, k.jobs, k.delayed, k.leases, k.coalesce, k.dead, k.seq}
}

// validPrefix rejects prefixes that would break the hash tag.
func validPrefix(p string) error {
	if strings.ContainsAny(p, "{}") {
		return fmt.Errorf("redisstream: prefix %q must not contain '{' or '}'", p)
	}
	return nil
}
