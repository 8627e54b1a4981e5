package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/jobs"
	"github.com/triage-dev/triage/worker/keys"
)

// What is happening to a batch now: whether a worker process is working
// it, which of its jobs a stopped process left running (they wait for
// River's rescuer), and why it is not progressing. Activity decides it
// from facts, without I/O or a clock; BatchActivity gathers the facts for
// `triage status B` and the batch page alike.

// WaitingOn names why a batch with records pending is not progressing: the
// "waiting_on" of `triage status B --json`'s activity. "" when it is
// progressing (or settled).
type WaitingOn string

// The reasons, first match wins in this order.
const (
	WaitingNothing   WaitingOn = ""
	WaitingCancelled WaitingOn = "cancelled"     // cancelled by hand: calls in flight finishing
	WaitingPaused    WaitingOn = "paused"        // paused by hand
	WaitingBudget    WaitingOn = "budget"        // spend cap reached
	WaitingKeyHeld   WaitingOn = "key_exhausted" // the key's exhausted breaker is open (out of money, quota)
	WaitingKeyBad    WaitingOn = "key_invalid"   // the key was refused as wrong or revoked
	WaitingSuspect   WaitingOn = "key_suspect"   // the safety net holds the key (rejection streak, throttle wall)
	WaitingStorm     WaitingOn = "storm"         // the key's storm breaker is open
	WaitingKeyPause  WaitingOn = "key_paused"    // the key is paused (a rate-limit pause, or by hand)
	WaitingNoWorker  WaitingOn = "no_worker"     // no worker process has a live heartbeat on the key
	WaitingRescuer   WaitingOn = "rescuer"       // only jobs a stopped process left running remain
	WaitingProvider  WaitingOn = "provider_batches"
)

// ActivityFacts are what Activity decides from.
type ActivityFacts struct {
	Status ledger.Status
	Batch  ledger.Batch
	// Key is the batch's key's breakers and pause; nil when unknown.
	Key *keys.KeyStatus
	// Workers is the worker processes with a live heartbeat on the key.
	Workers int
	// Jobs are the batch's unfinished River jobs; Jobs.Now is the moment
	// the facts were read.
	Jobs jobs.BatchNow
	// Horizon is the fleet's job timeout and rescue horizon; nil when
	// unknown (no configuration).
	Horizon *worker.Horizon
}

// Activity is what is happening to a batch now: the "activity" object of
// `triage status B --json`.
type Activity struct {
	// Workers is the worker processes with a live heartbeat on the batch's
	// key: 0 means nothing is working the batch.
	Workers int `json:"workers"`
	// RunningJobs and QueuedJobs count the batch's unfinished River jobs.
	RunningJobs int `json:"running_jobs"`
	QueuedJobs  int `json:"queued_jobs"`
	// OrphanedJobs counts the running jobs no live process works (its
	// process stopped without finishing them): River's rescuer hands them
	// back, at RescueAt at the earliest (null: none, or the horizon is
	// unknown without a configuration).
	OrphanedJobs int        `json:"orphaned_jobs"`
	RescueAt     *time.Time `json:"rescue_at"`
	// WaitingOn says why records pending make no progress ("" when they
	// do, or none is pending); Why says it for a person.
	WaitingOn WaitingOn `json:"waiting_on"`
	Why       string    `json:"why"`
}

// Activity decides what is happening to a batch from facts.
func (f ActivityFacts) Activity() Activity {
	a := Activity{Workers: f.Workers, RunningJobs: len(f.Jobs.RunningSince), QueuedJobs: f.Jobs.Queued}
	now := f.Jobs.Now
	for _, since := range f.Jobs.RunningSince {
		// With no live process on the key nobody holds the run; with one,
		// a run longer than River's job timeout has lost its process (River
		// would have cancelled it otherwise).
		orphan := f.Workers == 0 || (f.Horizon != nil && now.Sub(since) > f.Horizon.JobTimeout)
		if !orphan {
			continue
		}
		a.OrphanedJobs++
		if f.Horizon != nil {
			at := since.Add(f.Horizon.RescueAfter)
			if a.RescueAt == nil || at.Before(*a.RescueAt) {
				a.RescueAt = &at
			}
		}
	}
	st, key := f.Status, f.Batch.Key
	if key == "" {
		key = st.Key
	}
	if st.Pending <= 0 && a.RunningJobs == 0 && a.QueuedJobs == 0 {
		return a
	}
	waiting := func(w WaitingOn, why string) Activity {
		a.WaitingOn, a.Why = w, why
		return a
	}
	ks := f.Key
	switch st.State {
	case ledger.BatchSettled:
		return a
	case ledger.BatchCancelled:
		return waiting(WaitingCancelled, fmt.Sprintf("cancelled by hand: %s in flight finishing (each is recorded)%s",
			plural(a.RunningJobs, "call", "calls"), f.rescueNote(a)))
	case ledger.BatchPaused:
		return waiting(WaitingPaused, "paused by hand: its jobs stay queued; `triage batch resume "+st.Batch+"` starts them again")
	case ledger.BatchPausedBudget:
		return waiting(WaitingBudget, PausedWhy(st, f.Batch, ks))
	case ledger.BatchPausedExhausted:
		w := WaitingKeyHeld
		switch {
		case ks != nil && keys.InvalidKey(ks.Reason):
			w = WaitingKeyBad
		case ks != nil && ks.Hold != nil:
			w = WaitingSuspect
		}
		why := PausedWhy(st, f.Batch, ks)
		if ks != nil && ks.Hold != nil {
			why = "the safety net holds key " + key + " (" + ks.Hold.Kind + ": " + ks.Hold.Fingerprint + "); `triage keys resume " + key + "` once the cause is fixed" + OnFallback(st)
		}
		return waiting(w, why)
	}
	if ks != nil {
		if why := DescribeStorm(ks); why != "" {
			return waiting(WaitingStorm, "waiting: "+why)
		}
		if p := ks.Pause; p != nil && p.Until.After(now) {
			return waiting(WaitingKeyPause, fmt.Sprintf("key %s paused (%s) until %s, in %s", key, p.Reason,
				p.Until.Local().Format("15:04:05"), RoundWait(p.Until.Sub(now))))
		}
	}
	if f.Workers == 0 {
		why := "no worker process is working key " + key + " (no live heartbeat): start one with `triage work` (or `triage run`)"
		if a.OrphanedJobs > 0 {
			why += fmt.Sprintf("; %s left running by a stopped process come back once one runs (River's rescuer)",
				plural(a.OrphanedJobs, "job", "jobs"))
		}
		return waiting(WaitingNoWorker, why)
	}
	if a.OrphanedJobs > 0 && a.OrphanedJobs == a.RunningJobs && a.QueuedJobs == 0 {
		verb := "wait"
		if a.OrphanedJobs == 1 {
			verb = "waits"
		}
		return waiting(WaitingRescuer, fmt.Sprintf("%s left running by a process that stopped %s for River's rescuer%s",
			plural(a.OrphanedJobs, "job", "jobs"), verb, f.rescueNote(a)))
	}
	if a.RunningJobs == 0 && (len(st.ProviderBatches) > 0 || st.BatchLinesUnsent > 0) {
		why := "waiting for the provider's batch answers"
		switch {
		case len(st.ProviderBatches) > 0 && st.BatchLinesUnsent > 0:
			why += fmt.Sprintf(": %s in flight, %s waiting to be sent", plural(len(st.ProviderBatches), "provider batch", "provider batches"),
				plural(st.BatchLinesUnsent, "line", "lines"))
		case len(st.ProviderBatches) > 0:
			why += fmt.Sprintf(": %s in flight (a vendor answers within 24 h)", plural(len(st.ProviderBatches), "provider batch", "provider batches"))
		default:
			why += fmt.Sprintf(": %s waiting for the key's submitter to send them", plural(st.BatchLinesUnsent, "line", "lines"))
		}
		return waiting(WaitingProvider, why)
	}
	return a
}

// rescueNote is "; back at 02:14, in 3m" for orphaned jobs with a known
// horizon, "" otherwise.
func (f ActivityFacts) rescueNote(a Activity) string {
	if a.OrphanedJobs == 0 || a.RescueAt == nil {
		return ""
	}
	if !a.RescueAt.After(f.Jobs.Now) {
		return "; due back now (the rescuer runs every few seconds on the leader)"
	}
	return "; back at " + a.RescueAt.Local().Format("15:04:05") + ", in " + RoundWait(a.RescueAt.Sub(f.Jobs.Now))
}

// plural is "1 job", "3 jobs".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// ActivityOptions tune BatchActivity.
type ActivityOptions struct {
	// Schema is River's schema ("" for the search_path).
	Schema string
	// Config gives the fleet's rescue horizon; nil: unknown (no rescue
	// time is said).
	Config *config.Config
}

// BatchActivity gathers the facts about v now (the key's live worker
// processes, the batch's River jobs) and decides its Activity.
func BatchActivity(ctx context.Context, pool *pgxpool.Pool, v BatchView, opts ActivityOptions) (Activity, error) {
	live, err := liveWorkers(ctx, pool)
	if err != nil {
		return Activity{}, err
	}
	return batchActivity(ctx, pool, v, opts, live)
}

// liveWorkers is the worker processes with a live heartbeat, by key.
func liveWorkers(ctx context.Context, pool *pgxpool.Pool) (map[string]int, error) {
	pacing, err := keys.DefaultStore(pool).ListPacing(ctx)
	if err != nil {
		return nil, err
	}
	live := make(map[string]int, len(pacing))
	for _, p := range pacing {
		live[p.Key] = p.Live
	}
	return live, nil
}

// batchActivity is BatchActivity with the live workers read. A settled
// batch has no unfinished job: its River jobs are not read.
func batchActivity(ctx context.Context, pool *pgxpool.Pool, v BatchView, opts ActivityOptions, live map[string]int) (Activity, error) {
	f := ActivityFacts{Status: v.Status, Batch: v.Batch, Key: v.Key, Workers: live[v.Status.Key]}
	if v.Status.State != ledger.BatchSettled {
		var err error
		if f.Jobs, err = jobs.BatchRunning(ctx, pool, opts.Schema, v.Status.Batch); err != nil {
			return Activity{}, err
		}
	}
	if opts.Config != nil {
		h := worker.ConfigHorizon(opts.Config)
		f.Horizon = &h
	}
	return f.Activity(), nil
}

// ListBatchesNow is ListBatches with every batch's Activity read too (the
// live workers once), for `triage status` without a batch.
func ListBatchesNow(ctx context.Context, pool *pgxpool.Pool, opts ActivityOptions) ([]BatchView, error) {
	views, err := ListBatches(ctx, pool)
	if err != nil {
		return nil, err
	}
	live, err := liveWorkers(ctx, pool)
	if err != nil {
		return nil, err
	}
	for i := range views {
		a, err := batchActivity(ctx, pool, views[i], opts, live)
		if err != nil {
			return nil, err
		}
		views[i].Activity = &a
	}
	return views, nil
}

// Nows is the `triage status --json` shape of views (every batch with its
// activity): [] when empty.
func Nows(views []BatchView) []BatchNow {
	out := make([]BatchNow, len(views))
	for i, v := range views {
		out[i] = v.Now()
	}
	return out
}

// ShortActivity is the ACTIVITY column of `triage status`: "-" for a
// settled batch, "waiting: <what>" when pending records make no progress,
// else who works it ("1 worker, 4 running, 10 queued").
func ShortActivity(a *Activity, st ledger.Status) string {
	if a == nil || st.State == ledger.BatchSettled {
		return "-"
	}
	if a.WaitingOn != WaitingNothing {
		return "waiting: " + shortWaiting(a.WaitingOn, st.Key)
	}
	s := plural(a.Workers, "worker", "workers")
	if a.RunningJobs > 0 {
		s += fmt.Sprintf(", %d running", a.RunningJobs)
	}
	if a.QueuedJobs > 0 {
		s += fmt.Sprintf(", %d queued", a.QueuedJobs)
	}
	return s
}

// shortWaiting names a WaitingOn in a few words; `triage status B` says
// the whole reason.
func shortWaiting(w WaitingOn, key string) string {
	switch w {
	case WaitingCancelled:
		return "cancelled, calls in flight finishing"
	case WaitingPaused:
		return "paused by hand"
	case WaitingBudget:
		return "budget reached"
	case WaitingKeyHeld:
		return "key " + key + " exhausted"
	case WaitingKeyBad:
		return "key " + key + " invalid"
	case WaitingSuspect:
		return "key " + key + " held by the safety net"
	case WaitingStorm:
		return "storm on key " + key
	case WaitingKeyPause:
		return "key " + key + " paused"
	case WaitingNoWorker:
		return "no worker on key " + key
	case WaitingRescuer:
		return "jobs left for River's rescuer"
	case WaitingProvider:
		return "provider batches"
	}
	return string(w)
}

// GetBatchNow is GetBatch with the batch's Activity read too.
func GetBatchNow(ctx context.Context, pool *pgxpool.Pool, id string, opts ActivityOptions) (BatchView, error) {
	v, err := GetBatch(ctx, pool, id)
	if err != nil {
		return v, err
	}
	a, err := BatchActivity(ctx, pool, v, opts)
	if err != nil {
		return v, err
	}
	v.Activity = &a
	return v, nil
}

// BatchNow is `triage status B --json`: the batch's status with what is
// happening now (additive: every field of ledger.Status is unchanged).
type BatchNow struct {
	ledger.Status
	Activity *Activity `json:"activity,omitempty"`
	// LostAnswers counts the batch's calls whose answer was lost by how
	// each was resolved; omitted when none was lost.
	LostAnswers *ledger.LostAnswers `json:"lost_answers,omitempty"`
}

// DescribeWorkers is "2 worker processes on key main" or "none on key main
// (no live heartbeat)".
func DescribeWorkers(a Activity, key string) string {
	if a.Workers == 0 {
		return "none on key " + key + " (no live heartbeat)"
	}
	return plural(a.Workers, "worker process", "worker processes") + " on key " + key
}

// DescribeJobs is "3 running, 10 queued", with the jobs a stopped process
// left running and when River's rescuer hands them back.
func DescribeJobs(a Activity) string {
	s := fmt.Sprintf("%d running, %d queued", a.RunningJobs, a.QueuedJobs)
	if a.OrphanedJobs > 0 {
		s += fmt.Sprintf(" (%d of the running left by a stopped process, for River's rescuer", a.OrphanedJobs)
		if a.RescueAt != nil {
			s += " from " + a.RescueAt.Local().Format("15:04:05")
		}
		s += ")"
	}
	return s
}
