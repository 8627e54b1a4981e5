package jobrun

import (
	"context"
	"fmt"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/keys"
)

// AlertKeySuspect is raised when the safety net holds a key: a rejection
// streak or a throttle wall suggests an account problem the classifier did
// not recognise. Its fields name the hold and the failure's fingerprint.
const AlertKeySuspect keys.AlertKind = "key_suspect"

// SuspectLookback bounds how far before a rejection streak's hold the
// safety net looks for the dead letters it takes back: a streak is a run
// of calls in a row, so its dead letters are minutes old at most.
const SuspectLookback = 15 * time.Minute

// fingerprint is the call's failure fingerprint, through the key's
// redaction boundary: the same function of the same text the dead letter
// keeps, so a stored dead letter yields the same fingerprint.
func (c *call) fingerprint() string {
	return c.key.redact.Field(keys.Fingerprint(c.res.Observation.Status, deref(c.verdict.Code), ledger.Redact(c.res.Observation.Body)))
}

// storedFingerprint is fingerprint for a dead letter as stored.
func (k *Key) storedFingerprint(dl ledger.DeadLetter) string {
	return k.redact.Field(keys.Fingerprint(dl.HTTPStatus, dl.VendorCode, dl.ErrorExcerpt))
}

// watchCall tells the key's safety net what the call came to and acts on
// its decision: a hold opens the key's exhausted breaker (fleet-wide
// pause, probes) with a reason naming the hold and the fingerprint, and
// raises key_suspect once. It returns whether the call's record is part
// of a hold this process set, so that it waits for the key to resume
// rather than being dead-lettered or snoozed; the call's attempt is then
// recorded as the safety net read it (exhausted, reason the hold's kind),
// not as a rejection its record would be dead-lettered for next run.
func (r *Runner) watchCall(ctx context.Context, c *call, a decide.AfterCall) bool {
	return r.watchOutcome(ctx, c, a, false)
}

// watchLine is watchCall for a batch line's answer applied by its job: an
// error line counts toward the same rejection streak unless its provider
// batch answered another line with a success (the account served it), a
// good line ends it; a throttled line is not counted (it is about the
// provider batch, not the key's rate).
func (r *Runner) watchLine(ctx context.Context, c *call, a decide.AfterCall) bool {
	return r.watchOutcome(ctx, c, a, true)
}

// watchHooks are the safety net's test signals: tripped runs after a call
// past a hold's threshold tripped the key's breaker (opened: this call
// opened it), before the opener alerts; decided after every failed
// call's decision, with the hold its record is part of.
type watchHooks struct {
	tripped func(record string, opened bool)
	decided func(record, hold string)
}

func (r *Runner) watchOutcome(ctx context.Context, c *call, a decide.AfterCall, line bool) bool {
	held := r.watchDecide(ctx, c, a, line)
	if h := r.watchHooks; h != nil && h.decided != nil && a.Verdict.Class != classify.OK {
		h.decided(c.job.Args.RecordID, held)
	}
	if held != "" {
		c.verdict.Class, c.verdict.Reason = classify.Exhausted, held
	}
	return held != ""
}

// watchDecide is watchCall's decision: the hold the call is part of, ""
// for none.
func (r *Runner) watchDecide(ctx context.Context, c *call, a decide.AfterCall, line bool) string {
	k := c.key
	if k == nil || k.watch == nil || a.ClientErr != "" || a.Stopped() {
		return ""
	}
	ev := keys.WatchEvent{Record: c.job.Args.Batch + "/" + c.job.Args.RecordID, At: r.now()}
	switch {
	case a.Verdict.Class == classify.OK:
		ev.Kind = keys.WatchSuccess
	case a.Verdict.Class == classify.Rejected:
		ev.Kind = keys.WatchRejected
	case a.Verdict.Class == classify.Throttled && a.Verdict.RetryAfterS == nil && !line:
		ev.Kind = keys.WatchThrottled
	default:
		return ""
	}
	if ev.Kind != keys.WatchSuccess {
		ev.Fingerprint = c.fingerprint()
	}
	if ev.Kind == keys.WatchRejected && line && r.batchServed(ctx, c) {
		// Its provider batch answered a line with a success: the account
		// served that batch, whatever order its lines are applied in.
		ev.Kind = keys.WatchOther
	}
	if ev.Kind == keys.WatchRejected && !c.adm.Probe && r.secondChance(ctx, c, ev.Fingerprint) {
		// Taken back once for this very failure and rejected again: the
		// record's own problem, whatever the streak says.
		ev.Kind = keys.WatchOther
	}
	if ev.Kind == keys.WatchSuccess && !line {
		// The fleet's runs end in the completion's round trip
		// (completeOnce), or alone if the run ends otherwise
		// (resetWatchRun); this process's own at once.
		c.watchReset, c.watchAnsweredAt = true, ev.At
		k.watch.Observe(ev)
		return ""
	}
	d := r.observeWatch(ctx, k, ev)
	if ev.Kind == keys.WatchSuccess {
		return ""
	}
	if d.Hold == "" || c.adm.Probe {
		// A probe's own failure is the breaker's business (Done).
		return k.watch.Parks(c.adm.Generation, ev.Fingerprint)
	}
	// The process notes the hold before the trip makes it visible: a call
	// of this process that fails with the same error while the breaker is
	// being opened finds it (Parks) and its record waits for the key to
	// resume. Noted after the trip, such a call found no hold and its
	// record was dead-lettered (TestSafetyNetCallRacingTheHoldsOpenerWaits).
	undo := k.watch.Held(d, c.adm.Generation+1)
	opened, err := r.store.Trip(context.WithoutCancel(ctx), k.cfg.Name, c.adm, keys.HoldReason(d), k.cfg.ProbeInterval)
	if err != nil {
		undo()
		r.log.ErrorContext(ctx, "safety net hold", "key", k.cfg.Name, "err", err)
		return ""
	}
	if h := r.watchHooks; h != nil && h.tripped != nil {
		h.tripped(c.job.Args.RecordID, opened)
	}
	if !opened {
		// The hold this process notes is the opener's, if it is one of
		// this process's calls.
		undo()
		// Another call (of this process or another) opened the breaker
		// first: this call's failure is past the streak's threshold too,
		// so its record waits for the key to resume. Asking Parks here
		// raced the opener's Held (and another process's hold is never in
		// this process's watch): the record was dead-lettered, one more
		// than the wave in flight (17 of 16 in a CI run of
		// TestSafetyNetHoldsUnseenAccountError/request_error).
		return d.Hold
	}
	_ = r.opts.Reconcile(context.WithoutCancel(ctx), k.cfg.Name)
	if o, ok := r.opts.Observer.(HoldObserver); ok {
		o.ObserveHold(k.cfg.Name, d.Hold)
	}
	s := k.watch.Settings()
	msg := fmt.Sprintf("suspected account problem: %d different records rejected in a row with one error and no success between; "+
		"the key is held (its jobs stay queued, one probe every probe_interval) and the dead letters of that error go back to the queue",
		s.Rejections)
	if d.Hold == keys.HoldThrottleWall {
		msg = fmt.Sprintf("suspected account problem: only throttled answers naming no wait, none succeeding, for %s; "+
			"the key is held (its jobs stay queued, one probe every probe_interval)", s.ThrottleAfter)
	}
	r.alerter.Alert(ctx, keys.Alert{Kind: AlertKeySuspect, Key: k.cfg.Name, Batch: c.job.Args.Batch, Message: msg,
		Fields: map[string]any{"hold": d.Hold, "fingerprint": d.Fingerprint, "status": c.res.Observation.Status,
			"code": deref(c.verdict.Code), "probe_interval": k.cfg.ProbeInterval.String()}})
	return d.Hold
}

// resetWatchRun ends the key's fleet-wide safety-net runs after a
// success whose run did not end them in its completion (watchReset).
func (r *Runner) resetWatchRun(ctx context.Context, c *call) {
	if !c.watchReset {
		return
	}
	c.watchReset = false
	ctx = context.WithoutCancel(ctx)
	if err := ledger.ResetWatchRun(ctx, r.pool, c.key.cfg.Name, c.watchAnsweredAt); err != nil {
		r.log.WarnContext(ctx, "safety net: end the key's runs", "key", c.key.cfg.Name, "err", err)
	}
}

// observeWatch tells the key's safety net about one finished call and
// returns its decision. The runs are the fleet's (ledger.WatchRun, one row
// per key): two processes each seeing half a storm add to one streak, and
// a success in any process ends it. The decision is keys.DecideWatch over
// that row, taken under its lock. If the database cannot be reached the
// process's own runs decide (k.watch), as before the runs were shared.
func (r *Runner) observeWatch(ctx context.Context, k *Key, ev keys.WatchEvent) keys.WatchDecision {
	ctx = context.WithoutCancel(ctx)
	if ev.Kind == keys.WatchSuccess {
		if err := ledger.ResetWatchRun(ctx, r.pool, k.cfg.Name, ev.At); err != nil {
			r.log.WarnContext(ctx, "safety net: end the key's runs", "key", k.cfg.Name, "err", err)
		}
		return k.watch.Observe(ev)
	}
	// This process's own successes are heard at once; their reports to
	// the fleet's runs land with their completions, possibly after this
	// failure's.
	ev.LastSuccess = k.watch.LastSuccess()
	var d keys.WatchDecision
	settings := k.watch.Settings()
	err := ledger.ChangeWatchRun(ctx, r.pool, k.cfg.Name, func(run ledger.WatchRun) ledger.WatchRun {
		var st keys.WatchState
		st, d = keys.DecideWatch(watchStateOf(run), ev, settings)
		return watchRunOf(st)
	})
	if err != nil {
		r.log.WarnContext(ctx, "safety net: the fleet's runs are out of reach, this process's decide", "key", k.cfg.Name, "err", err)
		return k.watch.Observe(ev)
	}
	return d
}

func watchStateOf(run ledger.WatchRun) keys.WatchState {
	st := keys.WatchState{Fingerprint: run.Fingerprint, Records: run.Records, Throttles: run.Throttles, ThrottleFP: run.ThrottleFP}
	if run.ThrottleSince != nil {
		st.ThrottleSince = *run.ThrottleSince
	}
	if run.StreakSince != nil {
		st.StreakSince = *run.StreakSince
	}
	return st
}

func watchRunOf(st keys.WatchState) ledger.WatchRun {
	run := ledger.WatchRun{Fingerprint: st.Fingerprint, Records: st.Records, Throttles: st.Throttles, ThrottleFP: st.ThrottleFP}
	if st.Throttles > 0 {
		since := st.ThrottleSince
		run.ThrottleSince = &since
	}
	if len(st.Records) > 0 && !st.StreakSince.IsZero() {
		since := st.StreakSince
		run.StreakSince = &since
	}
	return run
}

// secondChance reports whether the call's record was dead-lettered for the
// failure fp and requeued before. Asked on the rejection path only.
func (r *Runner) secondChance(ctx context.Context, c *call, fp string) bool {
	dls, err := ledger.RequeuedDeadLetters(ctx, r.pool, c.job.Args.Batch, c.job.Args.RecordID)
	if err != nil {
		r.log.WarnContext(ctx, "safety net: read the record's dead letters", "key", c.key.cfg.Name, "err", err)
		return false
	}
	for _, dl := range dls {
		if c.key.storedFingerprint(dl) == fp {
			return true
		}
	}
	return false
}

// batchServed reports whether the provider batch of c's line answered a
// line with a success (ledger.LineBatchServed, set at its collection before
// any of its lines could be applied): one row read per rejected line.
func (r *Runner) batchServed(ctx context.Context, c *call) bool {
	served, err := ledger.LineBatchServed(ctx, r.pool, c.line.ID)
	if err != nil {
		r.log.WarnContext(ctx, "safety net: read the line's provider batch", "key", c.key.cfg.Name, "err", err)
		return false
	}
	return served
}

// HoldObserver, implemented by an Observer, hears each hold the safety net
// sets in this process (metrics).
type HoldObserver interface {
	ObserveHold(key, hold string)
}

// RequeueSuspects takes back, for every key of this process the safety net
// holds for a rejection streak, the dead letters of the streak's
// fingerprint: through the operator's requeue, once each, into the key's
// queue, which is paused while the hold lasts, so they run when it
// resumes. Run every tick while held, it also takes back the dead letters
// of calls that were in flight when the hold was set.
func (r *Runner) RequeueSuspects(ctx context.Context) {
	for name, k := range r.keys {
		st, err := r.store.KeyStatus(ctx, name)
		if err != nil {
			r.log.WarnContext(ctx, "safety net check", "key", name, "err", err)
			continue
		}
		if st.Hold == nil || st.Hold.Kind != keys.HoldRejectionStreak || st.OpenedAt == nil {
			continue
		}
		dls, err := ledger.DeadLettersOfKey(ctx, r.pool, name, classify.Rejected.String(), st.OpenedAt.Add(-SuspectLookback))
		if err != nil {
			r.log.WarnContext(ctx, "safety net check", "key", name, "err", err)
			continue
		}
		var ids []int64
		for _, dl := range dls {
			if k.storedFingerprint(dl) == st.Hold.Fingerprint {
				ids = append(ids, dl.ID)
			}
		}
		if len(ids) == 0 {
			continue
		}
		// Suspect whatever comes next: an operator sees them and can take
		// them back (`triage dlq requeue --suspect`) if this process cannot.
		if _, err := ledger.MarkSuspect(ctx, r.pool, ids, decide.SuspectSafetyNet); err != nil {
			r.log.WarnContext(ctx, "safety net: mark suspect dead letters", "key", name, "err", err)
		}
		if r.opts.RequeueDeadLetters == nil {
			r.alertOnce(ctx, name, "suspect_not_requeued:"+st.OpenedAt.UTC().Format(time.RFC3339Nano), keys.Alert{
				Kind: AlertKeySuspect, Key: name,
				Message: "the dead letters of the held key's fingerprint cannot go back by themselves in this process; requeue them by hand once it resumes",
				Fields:  map[string]any{"fingerprint": st.Hold.Fingerprint, "dead_letters": len(ids)}})
			continue
		}
		n, err := r.opts.RequeueDeadLetters(ctx, ids)
		if err != nil {
			// A dead letter whose job has not ended yet refuses the
			// requeue; the next tick tries again.
			r.log.InfoContext(ctx, "safety net requeue deferred", "key", name, "dead_letters", len(ids), "err", err)
			continue
		}
		r.log.WarnContext(ctx, "safety net: suspect dead letters back in the held key's queue", "key", name,
			"requeued", n, "fingerprint", st.Hold.Fingerprint)
	}
}
