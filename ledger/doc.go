// Package ledger is everything triage persists about calls: batches and their
// input records, every attempt (intent, outcome, tokens, cost), results, spend
// per key and batch, idempotency look-ups and dead letters. All SQL is here,
// parameterised, and mapped to domain types at the boundary (pgx.ErrNoRows is
// ErrNotFound). Every function takes a DBTX, so the worker writes the ledger
// in the same transaction as River's JobCompleteTx or InsertManyFastTx.
//
// # Intent before send
//
// A call is written to the ledger twice: BeginAttempt before the request's
// bytes leave the process (an "intent" row, committed), FinishAttempt after
// (outcome, tokens, cost). The rule exists because a provider bills a request
// once it has read it, whether or not the response ever reaches us: if the
// worker crashes, is killed or loses its connection mid-call, an intent row is
// the only trace that money may have been spent. Without it a retry after a
// crash would look like a first attempt and could bill the record twice.
//
// # possibly_billed
//
// An attempt is possibly_billed when the request was sent and no usable
// answer came back: a timeout or reset after the request was written, a
// stream cut midway. The provider may or may not have processed (and billed)
// it. An intent row left by a dead worker means the same. Before retrying
// such a record the worker calls PriorOutcome with the record's idempotency
// key: an attempt that finished ok means do not call again; otherwise the
// retry reuses the key (Idempotency-Key header) so a provider that supports
// it replays instead of billing again, and Prior.Ambiguous bounds how many
// ambiguous retries are made. When a retry with the key succeeds,
// ResolvePossiblyBilled marks the earlier ambiguous rows resolved. Until then
// their estimated cost (est_cost_usd, set at intent) is reported as
// possibly_billed_usd, apart from the billed spend_usd.
//
// How each lost answer came out is its Resolution (triage_attempt.resolution),
// set only by this package's statements: FinishAttempt of a possibly billed
// attempt (unknown), SettleFound (found by a look-up), the intent of a retry
// under the same key (resent) and AddDeadLetter (dead_lettered).
//
// A background response (OpenAI Responses API) has its id on the attempt
// that created it (SetAttemptResponseID): a later run polls it
// (PendingResponseID) and settles the attempts that lost it
// (SettleResumedResponse). One left running for a record dead-lettered
// cancelled is no longer wanted: the worker's pass finds it
// (LeftResponses), ends it at the provider and settles its attempts with
// SettleLeftResponse: cancelled (failed, reason response_cancelled) or
// ended before the cancel and billed (failed, reason
// response_ended_unwanted, its usage the attempt's cost, counted once).
//
// # Spend counters
//
// FinishAttempt does not add a cost to its batch's row: that row would then
// be locked until the completion transaction commits, and a batch would
// complete one call at a time fleet-wide. It appends the cost as a row of
// its own (triage_spend_delta); FoldSpend, run every few seconds by every
// worker process (one at a time does the work), moves those rows into the
// running totals, triage_batch.spent_usd and triage_key_spend. Readers add
// what is not folded yet (batchSpentSQL, KeySpend), so a cost is never
// counted twice or missed.
//
// # Budget reservations
//
// ReserveAttempt counts, against a batch's cap, billed spend plus the
// estimates of sends that will never settle (possibly billed attempts, and
// intents older than Intent.InFlightFor, whose run died) as spent, and only
// younger intents as reservations in flight. A capped batch therefore either
// has room, waits for calls really in flight, or pauses.
//
// QueuePriorOutcomeAndIntent is the read before a call and the intent of a
// first send of an uncapped batch in one statement, to be queued next to the
// breakers' admission: one round trip before a first call instead of two.
// The intent is then written before the caller's decision, and a caller that
// decides not to call withdraws it (WithdrawIntent). QueueSettleAnswer is
// the ledger side of an answered call in one statement (FinishAttempt,
// StoreResultCached, ResolvePossiblyBilled), for the batch that begins the
// completion's transaction (pgx.Batch.BeginTx).
//
// # Open lines
//
// A record's provider-batch line that is in a live provider batch, or holds
// a paid answer not applied yet, holds the record (BatchLine.Hold): it is
// neither moved, resent, requeued nor ended before its answer is collected.
// See batchline.go; HeldRecords is requeue's look-up by record.
//
// # Keys and provider batches
//
// The per-key state the fleet shares is here too, while worker/keys makes
// its decisions: both breakers' rows (keystate.go; every write changes a
// row only in the generation its caller read under the row lock), pauses
// (keypause.go; a pause is only ever extended) and the pacers' heartbeat
// rows (pacer.go). So are the submitter's provider batch rows and their
// lines (providerbatch.go), whose writes are fenced by the row's lease
// (ErrLeaseLost).
//
// # Time
//
// Timestamps come from the database clock; Intent.Now, Outcome.Now and
// DeadLetterRow.Now pin them when a test needs to (coalesce($n, now())).
package ledger
