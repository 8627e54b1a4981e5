package keys

import (
	"context"

	"github.com/riverqueue/river"
)

// QueueName is the River queue that holds a key's jobs: "key_" + key. Key
// names must be valid River queue name parts (lower-case letters and digits,
// optionally separated by single "_" or "-").
func QueueName(key string) string { return "key_" + key }

// ProbeQueueName is the River queue a key's probe job is moved to while the
// key's breaker is open; see the package documentation. Every process that
// works QueueName(key) must also work ProbeQueueName(key) (with the key's
// concurrency: jobs applying a paid batch answer run there too). The prefix differs from QueueName's so that no key's probe queue
// can collide with another key's queue.
func ProbeQueueName(key string) string { return "probe_" + key }

// QueueController pauses and resumes River queues fleet-wide. A
// *river.Client[pgx.Tx] satisfies it.
type QueueController interface {
	QueuePause(ctx context.Context, name string, opts *river.QueuePauseOpts) error
	QueueResume(ctx context.Context, name string, opts *river.QueuePauseOpts) error
}
