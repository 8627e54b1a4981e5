// Package jobrun is one job's run: where a record becomes a model call and a
// failure becomes a reaction. A batch's records are River jobs (kind
// "triage_call", worker/jobargs), one River queue per key; the run (Work, in
// work.go, as named steps: look up, check, render, admit, batch, budget,
// slot, pace, reserve, send, classify, report, watch, apply) renders the
// pipeline's prompt over the record,
// asks the key's breakers and reads the ledger's prior outcome (one round
// trip), writes the ledger intent, calls the provider, classifies the outcome
// with classify, and reacts by class.
//
// A first send that needs no wait (a concurrency slot free and its pace
// due: readyNow) writes its intent in the same round trip as the
// admission and the prior read (ledger.QueuePriorOutcomeAndIntent); every
// exit that then does not send withdraws it (ledger.WithdrawIntent), in
// the transaction it writes anyway or alone, so no intent is left that was
// never sent. A run that must wait writes its intent after the wait
// (ledger.ReserveAttempt), as before. After an answer, the outcome, the
// result (and cache row) are one statement (ledger.QueueSettleAnswer) in
// the batch that begins the completion's transaction, with the end of the
// key's safety-net runs and River's completion of the job
// (rivertable.QueueCompleteJobs), then the commit: three round trips for a
// job that calls once, one fewer than a bare River worker writing one row
// (TestRoundTripsPerFirstSend counts them). Answers that arrive while
// another's commit is in flight settle together in the next transaction
// (group commit, groupcommit.go); a completion the database cannot take
// yet is held and retried (durable.go).
//
// Deciding and doing are apart: decide.Before and decide.After (package
// worker/decide) are pure functions from what a run knows (its attempt, the
// prior outcome, the admission, the verdict, the result) to a
// decide.Reaction value, table-tested without a database, and a test there
// fails if that package ever reaches the database driver, River or the
// network; this package gathers the facts (worker/facts turns the ledger's
// and the breakers' answers into the decision's own types), and apply is the
// only place that acts on a reaction (ledger, queue, alerts, River's
// return value). The key's breakers hear each call's
// outcome once, through the done function keys.Gate.Admit returns.
//
//   - ok: the result row, the attempt's outcome and River's completion commit
//     in one transaction, so "completed" means "stored".
//   - transient: retried with jittered exponential backoff (honouring a
//     retry-after hint up to the backoff cap); max_attempts counts calls (from
//     the ledger), not River runs; after the last, dead letter
//     retries_exhausted. A run or a high share of transient failures trips the
//     key's storm breaker: its queue pauses fleet-wide and the failed jobs park
//     until a probe finds the provider back.
//   - throttled: the key is paused fleet-wide until the hint (or an adaptive
//     default), this process lowers the key's concurrency, and the job is
//     snoozed: no attempt is burned.
//   - exhausted: the key's shared breaker opens, its queue is paused fleet-wide,
//     an alert fires and the job is snoozed; a single probe per probe interval
//     decides when the key is usable again (see worker/keys).
//   - rejected: dead letter with the vendor's code; never resent unchanged.
//   - ambiguous: the attempt stays possibly_billed; the retry reuses the
//     idempotency key, and the ledger is read before any resend, so nothing is
//     billed twice; after ambiguous_retries, dead letter.
//
// Snoozes do not consume River attempts, so each job carries a snooze budget
// (pipelines' max_snoozes): past it, dead letter snoozed_out.
//
// A pipeline with mode = "batch" (or "auto" while its batch's deadline is far)
// makes no call in the job: the job writes its ledger intent at batch prices
// and a line (batchline.go), the key's submitter (worker/submitter) sends the
// lines as a provider batch and stores each answer, and the job's next run
// classifies that answer and reacts through the same decide.After and apply,
// the waits of a synchronous call becoming the next provider batch.
//
// The open-line rule (ledger.LineHold): a record whose line is in a live
// provider batch, or holds a paid answer not applied yet, is neither moved
// to a fallback, resent synchronously, requeued, nor ended before its answer
// is collected, and that answer is decoded and priced with the key and model
// that sent it. decide.Before is where a run and the fallback mover ask it
// (BeforeCall.Line); a job reads its open line whatever its pipeline's mode is
// now; a line not sent yet is taken back before the record goes another way
// (closeLine, fallbackmove.Move); and every key with provider batches in flight keeps
// a submitter, collect-only when no pipeline on it is in batch mode. A paid
// answer whose job was cancelled by hand stays held: a requeue gives it to
// the record's new job (ledger.RecordLine.OnRequeue), which applies it as
// its own with no call (completeOnce counts its settled attempt once).
//
// The safety net's watch of a key's outcomes (watch.go) holds a key whose
// rejections or throttles look like the key's fault, not the records';
// RequeueSuspects is the pass the worker's storm loop runs for it. The
// response cache (cache.go), the overflow and fallback retries
// (overflow.go, fallback.go), streaming's partial answers (streaming.go),
// background responses (background.go) and the pacing steps (pacing.go)
// are the rest of what a run may do.
//
// The worker root (package worker) builds a Runner from worker.Options,
// whose defaults are resolved there, and the state the process owns (the
// pool, the key store, the alerter, each key's client, gate and pacer:
// Key), and registers Runner.Worker with River.
package jobrun
