package worker

import (
	"context"

	"github.com/triage-dev/triage/worker/keys"
)

// PacerOf is key's pacer in this process, for tests that hold its pace.
func (r *Runtime) PacerOf(key string) *keys.Pacer {
	if k := r.keys[key]; k != nil {
		return k.pacer
	}
	return nil
}

// SetWorkContext wraps the context of every run of a job, before rt
// starts.
func (r *Runtime) SetWorkContext(f func(ctx context.Context, jobID int64) context.Context) {
	r.workCtx = f
}
