// Package worker is where a record becomes a model call and a failure becomes
// a reaction. A batch's records are River jobs (kind "triage_call"), one River
// queue per key; the worker renders the pipeline's prompt over the record,
// writes the ledger intent, calls the provider, classifies the outcome with
// classify, and reacts by class exactly as DESIGN.md's table says:
//
//   - ok: the result row, the attempt's outcome and River's completion commit
//     in one transaction (JobCompleteTx), so "completed" means "stored".
//   - transient: River retries with jittered exponential backoff (honouring a
//     retry-after hint); after the last attempt, dead letter retries_exhausted.
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
// Every record ends in a result or a dead letter, even when its job ends
// without the worker deciding: every process sweeps for jobs River discarded
// (dead letter discarded) and jobs cancelled or deleted by hand in River's
// CLI or UI (cancelled_by_hand, job_missing), so every batch can settle.
package worker
