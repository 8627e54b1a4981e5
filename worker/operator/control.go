package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/jobs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/settled"
)

// The controls of a batch by hand: pause, resume, cancel, delete and its
// spend cap. Each runs in one transaction that holds the batch's row lock,
// so two people (or a page and a command) acting on one batch act one after
// the other, and a worker reserving a call's intent (ledger.ReserveAttempt)
// either committed it before the change (the call is in flight, and is
// recorded) or sees the change and makes no call.

// Alert kinds the controls raise when an Alerter is given (the web page
// does: an action taken in a browser must leave a trace).
const (
	AlertBatchPaused    keys.AlertKind = "batch_paused"
	AlertBatchResumed   keys.AlertKind = "batch_resumed"
	AlertBatchCancelled keys.AlertKind = "batch_cancelled"
	AlertBatchBudget    keys.AlertKind = "batch_budget"
)

// ControlOptions tune a control.
type ControlOptions struct {
	// Alerter, if set, raises an alert naming the action. Default nil.
	Alerter *keys.Alerter
	// By says who acted, for the alert ("web", "hand"). Default "hand".
	By string
	// Schema is River's schema ("" for the search_path).
	Schema string
}

func (o ControlOptions) alert(ctx context.Context, kind keys.AlertKind, b ledger.Batch, msg string, fields map[string]any) {
	if o.Alerter == nil {
		return
	}
	if fields == nil {
		fields = map[string]any{}
	}
	fields["by"] = cmpOr(o.By, "hand")
	o.Alerter.Alert(ctx, keys.Alert{Kind: kind, Key: b.Key, Batch: b.ID, Message: msg, Fields: fields, ByHand: true})
}

// ControlResult is what a control did.
type ControlResult struct {
	// Before is the batch's stored state before the control.
	Before ledger.BatchState `json:"before"`
	// Changed: the control changed the batch (false: it was already so).
	Changed bool `json:"changed"`
	// Settled: every record of the batch had ended already.
	Settled bool `json:"settled"`
	// Woken counts the snoozed jobs made available (resume, budget).
	Woken int `json:"woken,omitempty"`
}

// lockBatch begins the control's read: the batch with its row locked; an
// unknown batch is an InputError.
func lockBatch(ctx context.Context, tx pgx.Tx, id string) (ledger.BatchLock, error) {
	l, err := ledger.LockBatch(ctx, tx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return l, inputErrorf("no batch %q (see `triage status`)", id)
	}
	return l, err
}

// PauseBatch pauses a batch by hand (`triage batch pause B`): its jobs stay
// queued, untouched, and make no call until ResumeBatch; a call already in
// flight finishes and is recorded, and an answer already on its way from a
// provider batch is still applied and billed. Pending batch lines are not
// sent. A settled or cancelled batch is an InputError.
func PauseBatch(ctx context.Context, pool *pgxpool.Pool, id string, opts ControlOptions) (ControlResult, error) {
	var res ControlResult
	var b ledger.Batch
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		l, err := lockBatch(ctx, tx, id)
		if err != nil {
			return err
		}
		b, res = l.Batch, ControlResult{Before: l.State, Settled: l.Settled()}
		switch {
		case l.State == ledger.BatchCancelled:
			return inputErrorf("batch %q is cancelled: there is nothing to pause", id)
		case l.Settled():
			return inputErrorf("batch %q is settled (every record has a result or a dead letter): there is nothing to pause", id)
		case l.State == ledger.BatchPaused:
			return nil
		}
		res.Changed = true
		return ledger.SetBatchState(ctx, tx, id, ledger.BatchPaused)
	})
	if err != nil {
		return ControlResult{}, err
	}
	if res.Changed {
		opts.alert(ctx, AlertBatchPaused, b, "batch paused by hand: its jobs stay queued and make no call until `triage batch resume`", nil)
	}
	return res, nil
}

// ResumeBatch resumes a batch paused by hand (`triage batch resume B`) and
// wakes its snoozed jobs. A batch not paused is left as it is (Changed
// false); a cancelled one is an InputError.
func ResumeBatch(ctx context.Context, pool *pgxpool.Pool, id string, opts ControlOptions) (ControlResult, error) {
	var res ControlResult
	var b ledger.Batch
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		l, err := lockBatch(ctx, tx, id)
		if err != nil {
			return err
		}
		b, res = l.Batch, ControlResult{Before: l.State, Settled: l.Settled()}
		switch l.State {
		case ledger.BatchCancelled:
			return inputErrorf("batch %q is cancelled: a cancelled batch cannot be resumed (requeue its dead letters with `triage dlq requeue --batch %s --reason %s`)",
				id, id, ledger.ReasonCancelled)
		case ledger.BatchPaused:
		default:
			return nil
		}
		res.Changed = true
		if err := ledger.SetBatchState(ctx, tx, id, ledger.BatchRunning); err != nil {
			return err
		}
		res.Woken, err = jobs.WakeBatch(ctx, tx, opts.Schema, id)
		return err
	})
	if err != nil {
		return ControlResult{}, err
	}
	if res.Changed {
		opts.alert(ctx, AlertBatchResumed, b, "batch resumed by hand: its queue drains again", nil)
	}
	return res, nil
}

// CancelResult is what CancelBatch did.
type CancelResult struct {
	ControlResult
	// DeadLettered counts the records dead-lettered now (reason
	// ledger.ReasonCancelled): their jobs were queued.
	DeadLettered int `json:"dead_lettered"`
	// LinesTakenBack counts batch lines not sent yet that were closed ($0).
	LinesTakenBack int `json:"lines_taken_back"`
	// InFlight counts the jobs left running: their call finishes and is
	// recorded; a record without an answer is dead-lettered cancelled by its
	// job's next run.
	InFlight int `json:"in_flight"`
	// ProviderBatches are the provider batches asked to cancel: their
	// answers are still collected and billed once, the lines they never
	// ran are dead-lettered cancelled.
	ProviderBatches []ledger.CancelRequest `json:"provider_batches"`
}

// CancelBatch cancels a batch by hand (`triage batch cancel B`), in one
// transaction: the batch's state becomes cancelled (no call starts after
// the commit), its batch lines not in a provider batch are closed at $0,
// its queued jobs are cancelled and their records dead-lettered with reason
// ledger.ReasonCancelled, and the provider batches holding its lines are
// asked to cancel (the key's submitter sends the cancel). Jobs running now
// finish their call, which is recorded; the answers of the provider batches
// are still collected and billed once. Once they are in, every record has a
// result or a dead letter and the batch settles. A settled batch is left as
// it is (Settled true); an unknown batch is an InputError.
func CancelBatch(ctx context.Context, pool *pgxpool.Pool, id string, opts ControlOptions) (CancelResult, error) {
	var res CancelResult
	var b ledger.Batch
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		l, err := lockBatch(ctx, tx, id)
		if err != nil {
			return err
		}
		b, res = l.Batch, CancelResult{ControlResult: ControlResult{Before: l.State, Settled: l.Settled()}}
		if l.Settled() {
			return nil
		}
		res.Changed = l.State != ledger.BatchCancelled
		if err := ledger.SetBatchState(ctx, tx, id, ledger.BatchCancelled); err != nil {
			return err
		}
		// Rows in the order the submitter and the worker lock them: provider
		// batches, then lines, then jobs.
		if res.ProviderBatches, err = ledger.RequestProviderCancel(ctx, tx, id); err != nil {
			return err
		}
		taken, err := ledger.TakeBackBatchLines(ctx, tx, id)
		if err != nil {
			return err
		}
		res.LinesTakenBack = len(taken)
		recs, err := jobs.CancelQueued(ctx, tx, opts.Schema, id)
		if err != nil {
			return err
		}
		res.DeadLettered, err = ledger.AddCancelledDeadLetters(ctx, tx, id, l.Key,
			"the batch was cancelled by hand (`triage batch cancel`) before this record had an outcome", recs)
		if err != nil {
			return err
		}
		res.InFlight, _, err = jobs.BatchLive(ctx, tx, opts.Schema, id)
		return err
	})
	if err != nil {
		return CancelResult{}, err
	}
	if res.Changed {
		opts.alert(ctx, AlertBatchCancelled, b,
			fmt.Sprintf("batch cancelled by hand: %d record(s) dead-lettered %s, %d call(s) in flight finishing", res.DeadLettered, ledger.ReasonCancelled, res.InFlight),
			map[string]any{"dead_lettered": res.DeadLettered, "in_flight": res.InFlight, "provider_batches": len(res.ProviderBatches)})
		if opts.Alerter != nil {
			// A cancel with nothing in flight settles the batch now: say
			// so without waiting for a worker's tick (there may be none).
			// The cancel has committed whatever this does; a failed claim
			// is left to the next worker's tick.
			_, _ = settled.Announce(ctx, pool, opts.Alerter)
		}
	}
	return res, nil
}

// DeleteBatch removes a settled batch (`triage batch delete B`): its
// records, results, dead letters, attempts, provider-batch lines and
// finished River jobs; the keys' spend counters keep what it cost. A batch
// not settled (a cancelled one with calls still in flight included) is an
// InputError naming what to do: nothing is deleted.
func DeleteBatch(ctx context.Context, pool *pgxpool.Pool, id string, opts ControlOptions) (ledger.Batch, error) {
	var b ledger.Batch
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		l, err := lockBatch(ctx, tx, id)
		if err != nil {
			return err
		}
		b = l.Batch
		running, queued, err := jobs.BatchLive(ctx, tx, opts.Schema, id)
		if err != nil {
			return err
		}
		switch {
		case running+queued > 0 && l.State == ledger.BatchCancelled:
			return inputErrorf("batch %q is cancelled but %d of its jobs have not finished (calls in flight are recorded first): nothing deleted; `triage wait %s`, then delete it",
				id, running+queued, id)
		case !l.Settled() || running+queued > 0:
			return inputErrorf("batch %q is not settled (%d of %d records ended): nothing deleted; cancel it first with `triage batch cancel %s`, then `triage wait %s`",
				id, l.Done, l.Total, id, id)
		}
		if _, err := jobs.DeleteBatch(ctx, tx, opts.Schema, id); err != nil {
			return err
		}
		return ledger.DeleteBatch(ctx, tx, id)
	})
	return b, err
}

// SetBudget sets (or, with nil, removes) a batch's spend cap and, in the
// same transaction, sets a batch paused at its cap running again and wakes
// its jobs (`triage batch budget B USD`). It returns the batch before and
// after. An unknown batch is an InputError.
func SetBudget(ctx context.Context, pool *pgxpool.Pool, id string, budgetUSD *float64, opts ControlOptions) (before, after ledger.Batch, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		l, err := lockBatch(ctx, tx, id)
		if err != nil {
			return err
		}
		before = l.Batch
		if err := ledger.SetBatchBudget(ctx, tx, id, budgetUSD); err != nil {
			return err
		}
		// Jobs parked at the old cap wake now, not when their snooze ends.
		if _, err := jobs.WakeBatch(ctx, tx, opts.Schema, id); err != nil {
			return err
		}
		after, err = ledger.GetBatch(ctx, tx, id)
		return err
	})
	if err != nil {
		return ledger.Batch{}, ledger.Batch{}, err
	}
	capText := "no spend cap"
	if after.BudgetUSD != nil {
		capText = fmt.Sprintf("spend cap $%.2f", *after.BudgetUSD)
	}
	opts.alert(ctx, AlertBatchBudget, after, "batch budget set by hand: "+capText, nil)
	return before, after, nil
}
