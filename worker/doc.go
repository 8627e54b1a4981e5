// Package worker is one triage worker process: Options, New, which builds
// the process from them, and Start/Stop. A record's job is run by worker/jobrun (River's worker, Work
// as its named steps, apply, the durable completion); this package builds
// its jobrun.Runner and each key's jobrun.Key (client, gate, pacer), the
// River client working the keys' queues (and the horizon it gives River:
// horizon.go), the keys' Supervisor and pacers, and the background services
// below.
//
// Every record ends in a result or a dead letter, even when its job ends
// without the worker deciding: every process sweeps (worker/sweep) for jobs
// River discarded (dead letter discarded) and jobs cancelled or deleted by
// hand in River's CLI or UI (cancelled_by_hand, job_missing), so every batch
// can settle.
//
// The background work is small services in packages of their own, each
// with a Config (WithDefaults, Validate), a one-pass RunOnce or Tick that
// its tests call, and Start/Stop (worker/service holds what they share);
// the Runtime builds them in New and only wires what they need from it:
// the storm loop (worker/stormwatch: storm_open once per storm, then the
// pass it is given, the safety net's requeue of a held key's dead
// letters, jobrun.Runner.RequeueSuspects), the fallback mover
// (worker/fallbackmove: the mover asks decide.Before on a queued job's
// behalf, jobrun.Runner.FallbackPlan renders the job for it), the spend
// loop (worker/spendwatch: spend alerts, the response cache's expiry, the
// announcement of settled batches through worker/settled, and the passes
// it is given: the orphan sweep and the left background responses,
// worker/leftresponses), retention (worker/retention) and the batch
// submitters (worker/submitter).
//
// Options.WithDefaults resolves every default, those that depend on the
// keys included (ProbeLease, RescueAfter: horizon.go), and validate refuses
// a negative setting with its name (the retry budget's through
// decide.RetryBudget, which /metrics and the web window use too); New
// returns every constructor's error (worker/keys' included) rather than
// panicking.
package worker
