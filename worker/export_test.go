package worker

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/triage-dev/triage/worker/keys"
)

// PacerOf is key's pacer in this process, for tests that hold its pace.
func (r *Runtime) PacerOf(key string) *keys.Pacer {
	if k := r.keys[key]; k != nil {
		return k.Pacer()
	}
	return nil
}

// SetWorkContext wraps the context of every run of a job, before rt
// starts.
func (r *Runtime) SetWorkContext(f func(ctx context.Context, jobID int64) context.Context) {
	r.run.SetWorkContext(f)
}

// SetGroupHooks sets the group commit's test signals before rt starts:
// waiting hears the number of answers waiting after one joins (under the
// group's lock), settle each group's size before its transaction; with
// failGroups every group of two or more fails its transaction.
func (r *Runtime) SetGroupHooks(waiting, settle func(n int), failGroups bool) {
	var batch func(b *pgx.Batch)
	if failGroups {
		batch = func(b *pgx.Batch) { b.Queue("SELECT 1/0") }
	}
	r.run.SetGroupHooks(waiting, settle, batch)
}

// SetWatchHooks sets the safety net's test signals before rt starts:
// tripped runs in a call past a hold's threshold right after its trip of
// the key's breaker (opened: it opened the hold), before the opener
// alerts; decided after every failed call's safety-net decision, with the
// hold its record is part of ("" for none).
func (r *Runtime) SetWatchHooks(tripped func(record string, opened bool), decided func(record, hold string)) {
	r.run.SetWatchHooks(tripped, decided)
}
