package jobrun

import (
	"context"
	"time"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
)

// Defaults for the completion retry.
const (
	// holdRetryFirst and holdRetryMax shape the backoff between tries.
	holdRetryFirst = 100 * time.Millisecond
	holdRetryMax   = 5 * time.Second
)

// retryUnreachable runs fn until it succeeds, fails for another reason than
// an unreachable database (ledger.Unreachable), or bound has passed since
// the first try; it returns fn's last error. Each try is a whole
// transaction, so a try that failed left nothing behind. onRetry, if set,
// hears about each failed try that will be tried again. ctx only carries
// values: a run that is being stopped still gets its answer stored.
func retryUnreachable(ctx context.Context, bound time.Duration, onRetry func(try int, err error), fn func(context.Context) error) error {
	ctx = context.WithoutCancel(ctx)
	deadline := time.Now().Add(bound)
	for try := 1; ; try++ {
		err := fn(ctx)
		// The fleet's one backoff (doubling, equal jitter): processes
		// that lost the database together do not all come back in the
		// same millisecond.
		wait := decide.Backoff(try, holdRetryFirst, holdRetryMax)
		if err == nil || !ledger.Unreachable(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		if onRetry != nil {
			onRetry(try, err)
		}
		time.Sleep(wait)
	}
}

// complete stores a paid-for answer and completes the job (completeOnce),
// holding the answer while the database is unreachable: a blip or restart
// must not throw away what was bought, to be bought again by the next run.
func (r *Runner) complete(ctx context.Context, c *call) error {
	held := false
	err := retryUnreachable(ctx, r.holdAnswer(), func(try int, err error) {
		if !held {
			held = true
			r.log.WarnContext(ctx, "database unreachable: holding the answer and retrying its completion",
				"job_id", c.job.ID, "batch", c.job.Args.Batch, "record_id", c.job.Args.RecordID, "err", err)
		}
	}, func(ctx context.Context) error { return r.completeOnce(ctx, c) })
	switch {
	case err != nil && held:
		r.log.ErrorContext(ctx, "answer not stored: the database stayed unreachable; the record will be sent again",
			"job_id", c.job.ID, "batch", c.job.Args.Batch, "record_id", c.job.Args.RecordID, "held_for", r.holdAnswer().String(), "err", err)
	case err == nil && held:
		r.log.InfoContext(ctx, "answer stored after the database came back",
			"job_id", c.job.ID, "batch", c.job.Args.Batch, "record_id", c.job.Args.RecordID)
	}
	return err
}

func (r *Runner) holdAnswer() time.Duration { return r.opts.HoldAnswer }
