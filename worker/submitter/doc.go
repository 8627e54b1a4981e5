// Package submitter sends the batch lines of one key as provider batches
// (the OpenAI Batch API, Anthropic Message Batches) and brings their answers
// back, for pipelines with mode = "batch" or "auto".
//
// A batch-mode job does not call the model: it writes its ledger intent and
// a pending line (its rendered vendor body, custom_id = its idempotency
// key) and sleeps. Every Tuning.Tick the key's Submitter:
//
//   - groups pending lines of one model, within the vendor's limits, into a
//     triage_provider_batch row in state intent, committed before any
//     provider call; then uploads (OpenAI) and creates the provider batch,
//     recording uploaded and submitted after each call;
//   - polls submitted batches with backoff (next_poll_at in the row, so any
//     process can take over), sending the provider's cancel first where
//     `triage batch cancel` or an auto pipeline's near deadline asked for it;
//   - collects ended batches: each line's embedded answer is stored as its
//     observation (answered), lines that never ran or are missing from the
//     results are not_run, and their jobs are woken. The job then applies
//     the answer through the worker's one classify/decide/apply path.
//
// The rows and lines are written by the ledger (ledger.ClaimProviderBatch
// and its neighbours, which keep the lease rule below); the submitter
// decides, calls the provider and wakes the lines' jobs.
//
// Fleet safety: a row is claimed by a short UPDATE … FOR UPDATE SKIP LOCKED
// that moves its next_poll_at a lease ahead; no lock is held across a
// provider call, and a process that dies mid-step loses its lease. A live
// process renews the lease while an upload, create or Find runs, and the
// next_poll_at it set is the fencing token of its writes to the row: a
// process that lost the lease anyway writes nothing more, and a provider
// batch it created for a row another process owns (a stray) is recorded as
// a row of its own and cancelled; its collection records each line it ran
// before the cancel as a paid duplicate of its record (reason
// ReasonStrayDuplicate, its cost in the spend), never as the record's
// answer (collectStray). An intent
// or uploaded row found after a crash is looked for at the provider
// (batchapi.Client.Find) before anything is sent again; a submitted row's
// lines are never sent again. A result line that cannot be read may be a
// line that ran: the lines left without a result are then answered as lost
// after the send (ambiguous, possibly billed), not as not run.
//
// Failures of the submitter's own calls are classified like any call:
// exhausted trips the key's breaker (running batches keep running; the
// submitter's next create is the key's probe), throttled waits for the
// hint, transient backs off, and no answer keeps the row for a Find.
//
// A batch refused as a whole naming no line (a create's 4xx, an OpenAI file
// error at validation) is split in halves, each a new intent row, until the
// bad line is alone; that line gets the refusal as its answer (its job
// dead-letters it). Too many such refusals in a row (Tuning.MaxRefusals)
// mean the refusal is about no line: the lines of further refused batches
// get it at once, and keys.AlertBatchRefused is raised.
//
// A key on which no pipeline is in batch mode any more (a mode switched to
// sync, a rolling deploy) keeps a collect-only Submitter (Config.CollectOnly)
// while it has provider batches in flight or open lines: it forms no new
// batch, but polls, collects and wakes, so no line sent is left uncollected.
//
// A line answered after its job was cancelled or deleted by hand is settled
// by the submitter: its attempt gets the answer's real cost (the provider
// billed it, reason ReasonJobGone) and no result is stored; the line stays
// answered, its answer held for a requeue of the record
// (ledger.AdoptBatchLine) until retention closes it.
package submitter
