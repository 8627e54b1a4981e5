// Package keys holds the per-key state a fleet of triage workers shares
// through PostgreSQL: two breakers per key (exhausted and storm), pauses,
// the Supervisor that makes River's queues follow them, and the pacing
// heartbeats; plus in-process pieces: the Gate that admits each call and
// hears its outcome, the Pacer, the concurrency Limiter (a ceiling) and the
// Alerter.
//
// Each key has one River queue, QueueName(key), and one probe queue,
// ProbeQueueName(key). Every process working a key's queue also works its
// probe queue and runs a Supervisor. Only the job holding the probe claim
// may call from the probe queue; while the key's queue is paused, the
// Supervisor also moves there the jobs that end without a call: those
// holding a paid batch answer, which apply it, and those past the worker's
// MaxAge (StoreConfig.ProbeMaxAge), which are dead-lettered.
//
// # Breakers
//
// Each key has two breakers with the same state machine (closed, open,
// half-open with a single probe, generations that discard stale results),
// each a row in PostgreSQL (triage_key_state, triage_storm_state, written
// and read by the ledger's breaker functions, ledger.LockBreaker and its
// neighbours; this package decides the transitions):
//
//   - the exhausted breaker (BreakerExhausted) is tripped by the first
//     exhausted call (credits, quota, revoked key). It needs a human, pages
//     one, and probes every probe_interval.
//   - the storm breaker (BreakerStorm) is tripped by transient failures that
//     come in a run or make up a high share of calls over a short window. It
//     heals itself: probes go after a cooldown that starts at storm_probe_min
//     and doubles with every failed probe up to storm_probe_max; a successful
//     probe closes it and wakes the key's parked jobs. It alerts only when
//     open longer than storm_alert_after.
//
// The safety net (watch.go) holds a key on the exhausted breaker when the
// outcomes, not the bodies, look like an account problem the classifier did
// not know: one failure fingerprint (Fingerprint) rejecting several different
// records in a row with no success between them, or only throttled answers
// naming no wait for a short window. DecideWatch decides, purely, in each
// process (as gobreaker decides the storm); Trip with a reason made by
// HoldReason makes the hold the fleet's, and ParseHold reads it back into
// KeyStatus.Hold. The hold then pauses, probes and resumes as an exhausted
// key does.
//
// While either is open the key's queue is paused fleet-wide and its jobs
// stay queued without spending attempts. The exhausted breaker wins: a key
// that needs a human is not probed for a storm.
//
// Who decides: the decision to trip the storm breaker is made in each
// process by gobreaker v2's TwoStepCircuitBreaker (Settings.ReadyToTrip
// over a rolling window, IsExcluded for outcomes that say nothing,
// MaxRequests 1), one per key in the Gate; StormFailure makes it the
// fleet's, and a newer shared generation (a probe somewhere closed the
// storm) gives every process a fresh gobreaker breaker. The shared rows,
// the probe claim and the exhausted breaker's transitions are this
// package's SQL, because gobreaker's DistributedCircuitBreaker cannot serve:
// its Execute holds the shared lock across the whole wrapped call (a model
// call of up to a minute), and it reads the shared state before taking the
// lock, so two processes recording failures at once lose one. Here each
// transition is a short transaction holding the key's row lock for the
// bookkeeping only, never across a model call. A probe claim is a token
// with a lease (StoreConfig.ProbeLease): if the worker holding it crashes,
// the claim lapses and the next probe can be claimed, so no lock outlives a
// process.
//
// A worker, for each call on key (job is the River job):
//
//	adm, pause, done, _ := gate.Admit(ctx, job.ID)
//	defer done(ctx, keys.OutcomeNone, "") // every exit reports once; gives a probe claim back
//	if !adm.Allowed || (pause != nil && !adm.Probe) { return river.JobSnooze(adm.Wait) }
//	... call the provider, classify ...
//	rep, _ := done(ctx, outcome, verdict.Reason) // success, failure (transient), exhausted, excluded
//	if rep.Changed { supervisor.Reconcile(ctx, key) }
//	if rep.Tripped { alert key_exhausted }; if rep.Resumed { alert key_resumed }
//	if rep.Storm.Open { park the job for rep.Storm.Wait instead of retrying }
//
// # The probe protocol
//
// Goal: with 200 jobs queued and a balance that runs out, the provider sees
// at most the calls in flight plus one probe per probe_interval; every other
// job stays queued untouched; after a top-up one probe succeeds and the batch
// completes.
//
//  1. The first exhausted call trips the breaker (open, probe_at =
//     now+probe_interval). Its worker reconciles at once and every
//     Supervisor within a tick: QueueName(key) is paused fleet-wide (River's
//     river_queue.paused_at), so no process fetches another of its jobs.
//     Calls already in flight finish; their exhausted results change nothing
//     (already open). A job fetched in the instant before the pause took
//     effect is refused by Admit; the worker snoozes it a second, not
//     until the probe time or the lease, so that it waits in the paused
//     queue and runs the moment the breaker closes (a snooze River records
//     after the close's wake would otherwise sit the close out).
//  2. The queue stays paused while the breaker is open or half-open.
//     Resuming it for the probe would let every process fetch up to its
//     MaxWorkers jobs at once, all but one to be snoozed again each
//     probe_interval, burning their snooze budget (snoozed_out); River has no
//     fleet-wide "fetch one". Instead, when probe_at passes, the first
//     Supervisor to get there claims the probe (half-open, token, lease) on
//     behalf of the next available job and moves that one job to
//     ProbeQueueName(key), in one transaction (river_job is locked FOR UPDATE
//     SKIP LOCKED, so a fetch and the move never both take it).
//  3. A worker fetches it there; Admit(key, job.ID) recognises the job the
//     claim was made for and returns Allowed+Probe with the claim's token
//     (and restarts the lease). Any other caller is refused while the claim
//     is live, so at most one probe call is out in the fleet.
//  4. Probe exhausted: ProbeResult(false) (or Trip with the probe admission)
//     reopens the breaker with a new probe_at; the job snoozes and a
//     Supervisor moves it back to QueueName(key). Probe ok: ProbeResult(true)
//     closes the breaker, Supervisors resume QueueName(key), the batch drains.
//     A probe that neither succeeds nor finds the key exhausted gives the
//     claim back with ReleaseProbe.
//  5. A crash: the claim's lease lapses and the next Supervisor tick
//     dispatches another job (the crashed one is rescued by River later and
//     moved back); a late ProbeResult of the old claim is ignored (token or
//     generation no longer match).
//
// The storm breaker uses the same protocol: StormFailure opens it, the
// Supervisor dispatches its probe when the cooldown has passed, and
// ProbeResult closes it or reopens it with the cooldown doubled. A probe job
// that ends before its admission (dead-lettered by the checks that come
// first) gives its claim back at once (ReleaseProbeOfJob), so a stale job
// cannot hold a key half-open for a whole lease.
//
// If no Supervisor runs, Admit alone still keeps the breaker: an open
// breaker whose probe is due gives the single probe to the first caller.
//
// # Pauses
//
// A pause (triage_pause, one per key) stops fetching until a time: Pause
// only extends it. The Supervisor pauses the key's River queue while a pause
// is active and resumes it after (unless the breaker is open), whichever
// process set it and whether or not that process still lives. River's
// QueuePause fails with rivertype.ErrNotFound for a queue no client has
// started yet; the Supervisor then creates the river_queue row already
// paused, so a client starting later starts paused.
//
// The Supervisor owns the paused state of QueueName(key) queues: a queue
// paused by hand (River UI) is resumed at the next tick unless the key is
// paused or its breaker open; use Pause or the breaker instead.
//
// # Pacing
//
// A Pacer paces one key's calls in this process by rate (two token buckets
// from golang.org/x/time/rate: requests and input tokens per second). Before
// a call: Wait(ctx, estimatedTokens, maxWait); after it: Observe with the
// answer's rate-limit headers (provider.RateLimit) and outcome. It learns
// the key's limit from the headers, or without them by rate-based AIMD from
// throttles (see control). The rate is the fleet's: a Pacers service
// renews one heartbeat row per key and process in triage_pacer every
// PacersConfig.Heartbeat, and each Pacer paces at the fleet rate divided by
// the live processes; a row counts for PacerTTLFactor heartbeats, so a
// process that died stops counting by itself.
//
// ThrottleScopeFor decides what a throttle stops: the job only (the pace
// slows down), this process's calls on the key for a moment (ScopeHold), or
// the key fleet-wide (ScopeKey, a Pause) when the provider says the whole key
// must wait.
//
// # Time
//
// StoreConfig.Clock pins the time for tests. Left nil, every statement uses
// the database's now(), so processes whose clocks differ agree.
package keys
