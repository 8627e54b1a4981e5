package rivertable

import (
	"github.com/jackc/pgx/v5"
)

// QueueCompleteJobs queues, in b, the completion of the running jobs ids:
// the statement River's JobCompleteTx runs for one job (state completed,
// finalized now), for many at once and in the batch that writes their
// answers, so a group of jobs settles in one transaction and one commit.
// A job no longer running (cancelled or deleted by hand meanwhile) is left
// as it is, as JobCompleteTx leaves it; River's own completer then finds
// the job completed and reports it so.
func QueueCompleteJobs(b *pgx.Batch, schema string, ids []int64) {
	b.Queue(`UPDATE `+Job(schema)+` SET state = 'completed', finalized_at = now()
		WHERE id = ANY($1) AND state = 'running'`, ids)
}
