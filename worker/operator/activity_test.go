package operator_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/jobs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/operator"
	"github.com/triage-dev/triage/worker/workertest"
)

// Activity decides, from facts alone, whether a batch moves and, when it
// does not, why: the first reason that holds it, in a fixed order.
func TestActivityWhy(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	horizon := &worker.Horizon{JobTimeout: 90 * time.Second, RescueAfter: 4 * time.Minute}
	running := func(st ledger.BatchState) ledger.Status {
		return ledger.Status{Batch: "b1", Key: "main", Total: 10, Pending: 6, State: st}
	}
	closed := &keys.KeyStatus{Key: "main", State: keys.StateClosed, Storm: keys.StormStatus{State: keys.StateClosed}, Now: now}
	opened := now.Add(-10 * time.Minute)
	probe := now.Add(30 * time.Second)
	exhausted := &keys.KeyStatus{Key: "main", State: keys.StateOpen, Reason: "insufficient_quota", OpenedAt: &opened, NextProbe: &probe,
		Storm: keys.StormStatus{State: keys.StateClosed}, Now: now}
	invalid := *exhausted
	invalid.Reason = "invalid_api_key"
	suspect := *exhausted
	suspect.Reason = "rejection_streak: 400 invalid_request_error"
	suspect.Hold = &keys.Hold{Kind: keys.HoldRejectionStreak, Fingerprint: "400 invalid_request_error"}
	storm := *closed
	storm.Storm = keys.StormStatus{State: keys.StateOpen, OpenedAt: &opened, NextProbe: &probe}
	paused := *closed
	paused.Pause = &keys.Pause{Key: "main", Reason: "rate_limited", Until: now.Add(20 * time.Second)}
	budget := 1.0
	jobs := func(queued int, since ...time.Duration) jobs.BatchNow {
		j := jobs.BatchNow{Queued: queued, Now: now}
		for _, d := range since {
			j.RunningSince = append(j.RunningSince, now.Add(-d))
		}
		return j
	}
	lines := running(ledger.BatchRunning)
	lines.ProviderBatches = []ledger.ProviderBatchStatus{{}}
	unsent := running(ledger.BatchRunning)
	unsent.BatchLinesUnsent = 3
	settled := running(ledger.BatchSettled)
	settled.Pending = 0

	for _, tc := range []struct {
		name     string
		f        operator.ActivityFacts
		want     operator.WaitingOn
		why      string // a part of Why
		orphaned int
		rescueAt *time.Time
	}{
		{name: "working", f: operator.ActivityFacts{Status: running(ledger.BatchRunning), Key: closed, Workers: 2, Jobs: jobs(4, time.Second, 2*time.Second), Horizon: horizon},
			want: operator.WaitingNothing},
		{name: "settled", f: operator.ActivityFacts{Status: settled, Key: closed, Jobs: jobs(0)}, want: operator.WaitingNothing},
		{name: "no worker", f: operator.ActivityFacts{Status: running(ledger.BatchRunning), Key: closed, Jobs: jobs(6)},
			want: operator.WaitingNoWorker, why: "no worker process is working key main"},
		{name: "no worker, a crash left jobs running", f: operator.ActivityFacts{Status: running(ledger.BatchRunning), Key: closed, Jobs: jobs(4, 10*time.Second, 20*time.Second), Horizon: horizon},
			want: operator.WaitingNoWorker, why: "2 jobs left running by a stopped process come back once one runs", orphaned: 2, rescueAt: ptr(now.Add(-20*time.Second + 4*time.Minute))},
		{name: "only orphans left, a worker runs", f: operator.ActivityFacts{Status: running(ledger.BatchRunning), Key: closed, Workers: 1, Jobs: jobs(0, 2*time.Minute, 3*time.Minute), Horizon: horizon},
			want: operator.WaitingRescuer, why: "2 jobs left running by a process that stopped wait for River's rescuer; back at", orphaned: 2, rescueAt: ptr(now.Add(time.Minute))},
		{name: "orphan overdue", f: operator.ActivityFacts{Status: running(ledger.BatchRunning), Key: closed, Workers: 1, Jobs: jobs(0, 5*time.Minute), Horizon: horizon},
			want: operator.WaitingRescuer, why: "1 job left running by a process that stopped waits for River's rescuer; due back now", orphaned: 1, rescueAt: ptr(now.Add(-time.Minute))},
		{name: "an orphan beside work goes on", f: operator.ActivityFacts{Status: running(ledger.BatchRunning), Key: closed, Workers: 1, Jobs: jobs(3, 2*time.Minute, time.Second), Horizon: horizon},
			want: operator.WaitingNothing, orphaned: 1, rescueAt: ptr(now.Add(2 * time.Minute))},
		{name: "a long run without a horizon is not called orphaned", f: operator.ActivityFacts{Status: running(ledger.BatchRunning), Key: closed, Workers: 1, Jobs: jobs(0, time.Hour)},
			want: operator.WaitingNothing},
		{name: "paused by hand", f: operator.ActivityFacts{Status: running(ledger.BatchPaused), Key: closed, Jobs: jobs(6)},
			want: operator.WaitingPaused, why: "`triage batch resume b1`"},
		{name: "budget", f: operator.ActivityFacts{Status: running(ledger.BatchPausedBudget), Batch: ledger.Batch{Key: "main", BudgetUSD: &budget, SpentUSD: 1}, Key: closed, Workers: 1, Jobs: jobs(6)},
			want: operator.WaitingBudget, why: "budget reached: spent $1.0000 of $1.0000"},
		{name: "key exhausted", f: operator.ActivityFacts{Status: running(ledger.BatchPausedExhausted), Key: exhausted, Workers: 1, Jobs: jobs(6)},
			want: operator.WaitingKeyHeld, why: "key main exhausted since"},
		{name: "key invalid", f: operator.ActivityFacts{Status: running(ledger.BatchPausedExhausted), Key: &invalid, Workers: 1, Jobs: jobs(6)},
			want: operator.WaitingKeyBad, why: "refused as invalid"},
		{name: "safety net", f: operator.ActivityFacts{Status: running(ledger.BatchPausedExhausted), Key: &suspect, Workers: 1, Jobs: jobs(6)},
			want: operator.WaitingSuspect, why: "the safety net holds key main (rejection_streak: 400 invalid_request_error)"},
		{name: "storm", f: operator.ActivityFacts{Status: running(ledger.BatchRunning), Key: &storm, Workers: 1, Jobs: jobs(6)},
			want: operator.WaitingStorm, why: "in a storm of provider failures"},
		{name: "key paused", f: operator.ActivityFacts{Status: running(ledger.BatchRunning), Key: &paused, Workers: 1, Jobs: jobs(6)},
			want: operator.WaitingKeyPause, why: "key main paused (rate_limited) until"},
		{name: "a pause outranks no worker", f: operator.ActivityFacts{Status: running(ledger.BatchPaused), Key: closed, Jobs: jobs(6)},
			want: operator.WaitingPaused},
		{name: "provider batches", f: operator.ActivityFacts{Status: lines, Key: closed, Workers: 1, Jobs: jobs(6)},
			want: operator.WaitingProvider, why: "1 provider batch in flight"},
		{name: "lines unsent", f: operator.ActivityFacts{Status: unsent, Key: closed, Workers: 1, Jobs: jobs(6)},
			want: operator.WaitingProvider, why: "3 lines waiting for the key's submitter"},
		{name: "cancelled, calls finishing", f: operator.ActivityFacts{Status: running(ledger.BatchCancelled), Key: closed, Workers: 1, Jobs: jobs(0, time.Second)},
			want: operator.WaitingCancelled, why: "1 call in flight finishing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.f.Activity()
			require.Equal(t, tc.want, a.WaitingOn, a.Why)
			require.Contains(t, a.Why, tc.why)
			if tc.want == operator.WaitingNothing {
				require.Empty(t, a.Why)
			}
			require.Equal(t, tc.orphaned, a.OrphanedJobs)
			require.Equal(t, tc.rescueAt, a.RescueAt)
			require.Equal(t, tc.f.Workers, a.Workers)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// BatchActivity reads the facts from the database: a live heartbeat on the
// key counts as a worker; a job a dead process left running counts as
// orphaned, with the time River's rescuer hands it back.
func TestBatchActivityFromTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 3)
	view := func() operator.BatchView {
		v, err := operator.GetBatch(ctx, b.db.Pool, "b1")
		require.NoError(t, err)
		return v
	}
	a, err := operator.BatchActivity(ctx, b.db.Pool, view(), operator.ActivityOptions{Schema: b.db.Schema, Config: b.cfg})
	require.NoError(t, err)
	require.Equal(t, operator.WaitingNoWorker, a.WaitingOn)
	require.Equal(t, 3, a.QueuedJobs)
	require.Zero(t, a.Workers)

	// A process crashed mid-call an hour ago: its job is still running in
	// River's table; another process heartbeats on the key.
	_, err = b.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempted_at = now() - interval '1 hour',
		attempted_by = '{dead}' WHERE args->>'record_id' = 'r001'`)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE args->>'record_id' <> 'r001'`)
	require.NoError(t, err)
	store := keys.DefaultStore(b.db.Pool)
	_, err = store.PacerHeartbeat(ctx, workertest.Key, "live-process", keys.PaceState{Source: keys.PaceStarting, Factor: 1}, time.Minute)
	require.NoError(t, err)
	a, err = operator.BatchActivity(ctx, b.db.Pool, view(), operator.ActivityOptions{Schema: b.db.Schema, Config: b.cfg})
	require.NoError(t, err)
	require.Equal(t, 1, a.Workers)
	require.Equal(t, 1, a.RunningJobs)
	require.Equal(t, 1, a.OrphanedJobs)
	require.Equal(t, operator.WaitingRescuer, a.WaitingOn, a.Why)
	require.NotNil(t, a.RescueAt)
	require.Contains(t, a.Why, "due back now")
}

// TestShortActivity: the ACTIVITY column of `triage status` in a few words.
func TestShortActivity(t *testing.T) {
	t.Parallel()
	running := ledger.Status{Key: "main", State: ledger.BatchRunning}
	for _, tc := range []struct {
		a    *operator.Activity
		st   ledger.Status
		want string
	}{
		{nil, running, "-"},
		{&operator.Activity{}, ledger.Status{Key: "main", State: ledger.BatchSettled}, "-"},
		{&operator.Activity{QueuedJobs: 2, WaitingOn: operator.WaitingNoWorker}, running, "waiting: no worker on key main"},
		{&operator.Activity{WaitingOn: operator.WaitingKeyBad}, running, "waiting: key main invalid"},
		{&operator.Activity{WaitingOn: operator.WaitingPaused}, running, "waiting: paused by hand"},
		{&operator.Activity{Workers: 1, RunningJobs: 4, QueuedJobs: 10}, running, "1 worker, 4 running, 10 queued"},
		{&operator.Activity{Workers: 2}, running, "2 workers"},
	} {
		require.Equal(t, tc.want, operator.ShortActivity(tc.a, tc.st))
	}
}
