package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A key's submitter (worker/submitter) groups the pending lines of
// batch-mode jobs into provider batches (triage_provider_batch, one row per
// provider batch) and moves each through its states:
//
//	intent → uploaded (OpenAI's input file) → submitted → ended → collected
//	                                   ↘ abandoned (never created, lines back)
//
// An intent row is committed, with its lines moved to it (submitted),
// before any provider call: a process that dies after the create leaves a
// row whose batch the next claim looks for before sending again.
//
// # Leases
//
// A row is worked by one process at a time: ClaimProviderBatch takes the row
// due soonest and moves its next_poll_at to the lease's end. That
// next_poll_at is the fencing token of the claimer's writes: every write
// below that takes a lease changes the row only while next_poll_at is still
// the lease the caller holds, and a caller whose lease ran out (another
// process claimed the row after it) gets ErrLeaseLost, or changes nothing
// where that is harmless, instead of undoing the new owner's work.
//
// # Lines and their jobs
//
// The statements that answer, give back or end lines return the River jobs
// of the lines they changed: the caller wakes them in the same transaction
// (rivertable.WakeJobs), so a job never sleeps past its line's answer.

// ErrLeaseLost: another process claimed the provider batch row after the
// caller's lease ran out; nothing was written.
var ErrLeaseLost = errors.New("ledger: lease on the provider batch row lost to another process")

// ProviderBatch is a claimed triage_provider_batch row.
type ProviderBatch struct {
	ID                                    int64
	State, Model                          string
	ProviderID, InputFileID, VendorStatus *string
	CreatedAt                             time.Time
	CancelRequested                       bool
	Polls                                 int
	// Lease is the row's next_poll_at as the caller last set it (claim,
	// form, renew): the fencing token of its writes.
	Lease time.Time
	// Tag is the row's random tag, sent as the provider batch's metadata
	// and looked for after a crash.
	Tag string
	// StrayOf is, for a stray provider batch (RecordStrayBatch), the row
	// whose lines it holds; nil for every other row.
	StrayOf *int64
}

// PendingLines selects the key's lines waiting for a provider batch that
// may go now: not of a batch whose auto-mode deadline is near (Auto, at
// Now: they go synchronously), not of a job that can no longer run (a
// line whose job was cancelled or deleted by hand is never sent, so never
// billed), not of a batch paused or cancelled by hand.
type PendingLines struct {
	Key  string
	Auto []AutoMargin
	Now  time.Time
	// RiverJob is River's job table, quoted (rivertable.Job).
	RiverJob string
}

// pendingWhere is PendingLines' condition on line l; $1 key, $2 and $3 the
// auto pipelines and their margins in seconds, $4 now.
func (q PendingLines) where() string {
	return `l.key = $1 AND l.state = 'pending'
		AND NOT EXISTS (SELECT 1 FROM triage_batch tb
			JOIN unnest($2::text[], $3::float8[]) AS m(pipeline, margin) ON m.pipeline = tb.pipeline
			WHERE tb.id = l.batch AND tb.deadline IS NOT NULL AND tb.deadline < $4::timestamptz + make_interval(secs => m.margin))
		AND ` + liveJob(q.RiverJob) + `
		AND NOT ` + lineHeldSQL
}

func (q PendingLines) args() []any {
	names := make([]string, len(q.Auto))
	secs := make([]float64, len(q.Auto))
	for i, a := range q.Auto {
		names[i], secs[i] = a.Pipeline, a.Margin.Seconds()
	}
	return []any{q.Key, names, secs, q.Now}
}

// liveJob is the condition "line l's River job can still run".
func liveJob(riverJob string) string {
	return `EXISTS (SELECT 1 FROM ` + riverJob + ` j
		WHERE j.id = l.job_id AND j.state NOT IN ('cancelled', 'completed', 'discarded'))`
}

// PendingLinesRipe reports whether q's lines should go now: none arrived
// for gather, or the oldest has waited ten times that (a steady trickle is
// still sent), or there are maxLines of them (a batch is full).
func PendingLinesRipe(ctx context.Context, db DBTX, q PendingLines, gather time.Duration, maxLines int) (bool, error) {
	var ripe bool
	args := append(q.args(), gather.Seconds(), maxLines)
	if err := db.QueryRow(ctx, `SELECT coalesce(max(l.pending_since) < now() - make_interval(secs => $5)
			OR min(l.pending_since) < now() - make_interval(secs => 10 * $5) OR count(*) >= $6, false)
		FROM triage_provider_batch_line l
		WHERE `+q.where(), args...).Scan(&ripe); err != nil {
		return false, fmt.Errorf("ledger: pending lines of key %q: %w", q.Key, err)
	}
	return ripe, nil
}

// ProviderBatchLine is one line of a provider batch, in input order.
type ProviderBatchLine struct {
	ID       int64
	CustomID string
	Body     []byte
	// Model is the body's model (LockPendingLines only; "" when none).
	Model string
}

// LockPendingLines locks (FOR UPDATE SKIP LOCKED, until tx ends) up to
// limit of q's lines, oldest first, and gives them to fn in that order
// until fn returns false.
func LockPendingLines(ctx context.Context, tx DBTX, q PendingLines, limit int, fn func(ProviderBatchLine) bool) error {
	rows, err := tx.Query(ctx, `SELECT l.id, l.custom_id, l.body, l.body->>'model'
			FROM triage_provider_batch_line l
			WHERE `+q.where()+`
			ORDER BY l.id LIMIT $5 FOR UPDATE OF l SKIP LOCKED`,
		append(q.args(), limit)...)
	if err != nil {
		return fmt.Errorf("ledger: pending lines of key %q: %w", q.Key, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			l     ProviderBatchLine
			model *string
		)
		if err := rows.Scan(&l.ID, &l.CustomID, &l.Body, &model); err != nil {
			return fmt.Errorf("ledger: pending lines of key %q: %w", q.Key, err)
		}
		if model != nil {
			l.Model = *model
		}
		if !fn(l) {
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: pending lines of key %q: %w", q.Key, err)
	}
	return nil
}

// NewProviderBatch is a provider batch to create, in state intent.
type NewProviderBatch struct {
	Key, Vendor, Model string
	// Lines are the ids of its lines.
	Lines []int64
	// NextPollAt is its lease's end (or now: due at once).
	NextPollAt time.Time
}

// CreateProviderBatch writes b's intent row and moves its lines, pending
// and locked by LockPendingLines in tx, to it as submitted. The row's
// created_at is the database's clock, not the host's: it is the lower
// bound of the look-up for the batch after a lost create answer, and a
// host clock ahead of the provider's would cut that window short of the
// batch and have it created again.
func CreateProviderBatch(ctx context.Context, tx DBTX, b NewProviderBatch) (ProviderBatch, error) {
	r := ProviderBatch{State: "intent", Model: b.Model}
	if err := tx.QueryRow(ctx, `INSERT INTO triage_provider_batch (key, vendor, model, lines, next_poll_at)
			VALUES ($1, $2, $3, $4, $5) RETURNING id, next_poll_at, tag, created_at`,
		b.Key, b.Vendor, b.Model, len(b.Lines), b.NextPollAt).Scan(&r.ID, &r.Lease, &r.Tag, &r.CreatedAt); err != nil {
		return ProviderBatch{}, fmt.Errorf("ledger: create a provider batch of key %q: %w", b.Key, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE triage_provider_batch_line SET provider_batch = $1, state = 'submitted' WHERE id = ANY($2)`,
		r.ID, b.Lines); err != nil {
		return ProviderBatch{}, fmt.Errorf("ledger: lines of provider batch %d: %w", r.ID, err)
	}
	return r, nil
}

// SplitProviderBatch ends r in state (under r's lease: ErrLeaseLost) and
// moves its submitted lines into one new intent row per part, due at now,
// in one transaction. It returns the new rows' ids.
func SplitProviderBatch(ctx context.Context, db DBTX, key, vendor string, r ProviderBatch, state string, now time.Time, parts [][]int64) ([]int64, error) {
	out := make([]int64, len(parts))
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := EndProviderBatch(ctx, tx, r, state, now); err != nil {
			return err
		}
		for i, p := range parts {
			if err := tx.QueryRow(ctx, `INSERT INTO triage_provider_batch (key, vendor, model, lines, next_poll_at)
				VALUES ($1, $2, $3, $4, $5) RETURNING id`,
				key, vendor, r.Model, len(p), now).Scan(&out[i]); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE triage_provider_batch_line SET provider_batch = $1
				WHERE id = ANY($2) AND provider_batch = $3 AND state = 'submitted'`, out[i], p, r.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: split provider batch %d: %w", r.ID, err)
	}
	return out, nil
}

// ClaimProviderBatch takes key's provider batch row due a step soonest (at
// now: intent, uploaded, submitted or ended), leasing it until leaseUntil;
// ok false when none is due.
func ClaimProviderBatch(ctx context.Context, db DBTX, key string, now, leaseUntil time.Time) (r ProviderBatch, ok bool, err error) {
	err = db.QueryRow(ctx, `UPDATE triage_provider_batch SET next_poll_at = $2
		WHERE id = (SELECT id FROM triage_provider_batch
			WHERE key = $1 AND state IN ('intent', 'uploaded', 'submitted', 'ended') AND next_poll_at <= $3
			ORDER BY next_poll_at LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING id, state, model, provider_batch_id, input_file_id, vendor_status, created_at, cancel_requested, polls, next_poll_at, tag, stray_of`,
		key, leaseUntil, now).Scan(&r.ID, &r.State, &r.Model, &r.ProviderID, &r.InputFileID, &r.VendorStatus,
		&r.CreatedAt, &r.CancelRequested, &r.Polls, &r.Lease, &r.Tag, &r.StrayOf)
	if errors.Is(err, pgx.ErrNoRows) {
		return ProviderBatch{}, false, nil
	}
	if err != nil {
		return ProviderBatch{}, false, fmt.Errorf("ledger: claim a provider batch of key %q: %w", key, err)
	}
	return r, true, nil
}

// ProviderBatchLines returns the lines of provider batch id, in input
// order.
func ProviderBatchLines(ctx context.Context, db DBTX, id int64) ([]ProviderBatchLine, error) {
	rows, err := db.Query(ctx, `SELECT id, custom_id, body FROM triage_provider_batch_line
		WHERE provider_batch = $1 ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("ledger: lines of provider batch %d: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ProviderBatchLine, error) {
		var l ProviderBatchLine
		err := r.Scan(&l.ID, &l.CustomID, &l.Body)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: lines of provider batch %d: %w", id, err)
	}
	return out, nil
}

// RenewProviderBatch moves r's lease to until, counting sends more sends in
// its polls, and sets r.Lease. ErrLeaseLost.
func RenewProviderBatch(ctx context.Context, db DBTX, r *ProviderBatch, until time.Time, sends int) error {
	err := db.QueryRow(ctx, `UPDATE triage_provider_batch SET next_poll_at = $2, polls = polls + $4
		WHERE id = $1 AND next_poll_at = $3
		RETURNING next_poll_at`, r.ID, until, r.Lease, sends).Scan(&r.Lease)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("ledger: provider batch %d: %w", r.ID, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("ledger: renew the lease of provider batch %d: %w", r.ID, err)
	}
	return nil
}

// ProviderBatchLease reads the lease (next_poll_at) of provider batch id:
// what a renewal whose answer was lost wrote, or not.
func ProviderBatchLease(ctx context.Context, db DBTX, id int64) (time.Time, error) {
	var lease time.Time
	if err := db.QueryRow(ctx, `SELECT next_poll_at FROM triage_provider_batch WHERE id = $1`, id).Scan(&lease); err != nil {
		return time.Time{}, fmt.Errorf("ledger: read the lease of provider batch %d: %w", id, err)
	}
	return lease, nil
}

// RecordUpload records r's uploaded input file (state uploaded).
// ErrLeaseLost.
func RecordUpload(ctx context.Context, db DBTX, r ProviderBatch, fileID string) error {
	tag, err := db.Exec(ctx, `UPDATE triage_provider_batch SET state = 'uploaded', input_file_id = $2
			WHERE id = $1 AND next_poll_at = $3`, r.ID, fileID, r.Lease)
	if err != nil {
		return fmt.Errorf("ledger: record upload of provider batch %d: %w", r.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("ledger: record upload of provider batch %d: %w", r.ID, ErrLeaseLost)
	}
	return nil
}

// SubmittedBatch is what the provider said of a created batch.
type SubmittedBatch struct {
	ProviderID string
	// InputFileID: "" keeps the row's.
	InputFileID  string
	VendorStatus string
	// Counts is the vendor's request counts, as JSON.
	Counts []byte
	// ExpiresAt: zero when not known.
	ExpiresAt time.Time
}

// RecordSubmitted records r as created at the provider (state submitted,
// submitted at now unless it was before), its next poll at nextPoll and no
// poll counted yet. ErrLeaseLost: the row is another process's, which may
// have recorded this same batch or another (RecordStrayBatch sorts which).
func RecordSubmitted(ctx context.Context, db DBTX, r ProviderBatch, b SubmittedBatch, now, nextPoll time.Time) error {
	var expires *time.Time
	if !b.ExpiresAt.IsZero() {
		expires = &b.ExpiresAt
	}
	tag, err := db.Exec(ctx, `UPDATE triage_provider_batch SET state = 'submitted', provider_batch_id = $2,
			input_file_id = coalesce(nullif($3, ''), input_file_id), vendor_status = $4, counts = $5,
			submitted_at = coalesce(submitted_at, $6), expires_at = $7, next_poll_at = $8, polls = 0, last_error = NULL
		WHERE id = $1 AND next_poll_at = $9`, r.ID, b.ProviderID, b.InputFileID, b.VendorStatus, b.Counts, now, expires,
		nextPoll, r.Lease)
	if err != nil {
		return fmt.Errorf("ledger: record provider batch %d as %s: %w", r.ID, b.ProviderID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("ledger: record provider batch %d as %s: %w", r.ID, b.ProviderID, ErrLeaseLost)
	}
	return nil
}

// RescheduleProviderBatch gives back r's lease until at. A row another
// process claimed meanwhile keeps that one's lease (nothing is written).
func RescheduleProviderBatch(ctx context.Context, db DBTX, r ProviderBatch, at time.Time) error {
	if _, err := db.Exec(ctx, `UPDATE triage_provider_batch SET next_poll_at = $2 WHERE id = $1 AND next_poll_at = $3`,
		r.ID, at, r.Lease); err != nil {
		return fmt.Errorf("ledger: reschedule provider batch %d: %w", r.ID, err)
	}
	return nil
}

// RecordPollFailed records a failed provider call on r (msg, one more
// poll) and gives back its lease until at. A row another process claimed
// meanwhile is left as it is.
func RecordPollFailed(ctx context.Context, db DBTX, r ProviderBatch, msg string, at time.Time) error {
	if _, err := db.Exec(ctx, `UPDATE triage_provider_batch SET next_poll_at = $2, polls = polls + 1, last_error = $3
		WHERE id = $1 AND next_poll_at = $4`, r.ID, at, msg, r.Lease); err != nil {
		return fmt.Errorf("ledger: reschedule provider batch %d: %w", r.ID, err)
	}
	return nil
}

// RecordPoll records what a poll of r said (the vendor's status and
// counts, one more poll, no error) and gives back its lease until at. A
// row another process claimed meanwhile is left as it is.
func RecordPoll(ctx context.Context, db DBTX, r ProviderBatch, vendorStatus string, counts []byte, at time.Time) error {
	if _, err := db.Exec(ctx, `UPDATE triage_provider_batch SET vendor_status = $2, counts = $3, polls = polls + 1,
			next_poll_at = $4, last_error = NULL WHERE id = $1 AND next_poll_at = $5`,
		r.ID, vendorStatus, counts, at, r.Lease); err != nil {
		return fmt.Errorf("ledger: record poll of provider batch %d: %w", r.ID, err)
	}
	return nil
}

// EndedBatch is what the provider said of an ended batch.
type EndedBatch struct {
	VendorStatus string
	Counts       []byte
	// OutputFileID, ErrorFileID: "" when none.
	OutputFileID, ErrorFileID string
	EndedAt                   time.Time
}

// RecordProviderBatchEnd records that r's provider batch ended (state
// ended, from submitted or ended: a collection cut midway records it
// again, keeping the first ended_at).
func RecordProviderBatchEnd(ctx context.Context, db DBTX, r ProviderBatch, b EndedBatch) error {
	if _, err := db.Exec(ctx, `UPDATE triage_provider_batch SET state = 'ended', vendor_status = $2, counts = $3,
			output_file_id = nullif($4, ''), error_file_id = nullif($5, ''), ended_at = coalesce(ended_at, $6)
		WHERE id = $1 AND state IN ('submitted', 'ended')`, r.ID, b.VendorStatus, b.Counts, b.OutputFileID, b.ErrorFileID, b.EndedAt); err != nil {
		return fmt.Errorf("ledger: record end of provider batch %d: %w", r.ID, err)
	}
	return nil
}

// EndProviderBatch moves r to a final state (abandoned, collected) at now,
// under r's lease. ErrLeaseLost.
func EndProviderBatch(ctx context.Context, db DBTX, r ProviderBatch, state string, now time.Time) error {
	tag, err := db.Exec(ctx, `UPDATE triage_provider_batch SET state = $2, collected_at = $3 WHERE id = $1 AND next_poll_at = $4`,
		r.ID, state, now, r.Lease)
	if err != nil {
		return fmt.Errorf("ledger: end provider batch %d: %w", r.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("ledger: end provider batch %d: %w", r.ID, ErrLeaseLost)
	}
	return nil
}

// CollectedProviderBatch marks row id collected at now, once every line has
// its outcome.
func CollectedProviderBatch(ctx context.Context, db DBTX, id int64, now time.Time) error {
	if _, err := db.Exec(ctx, `UPDATE triage_provider_batch SET state = 'collected', collected_at = $2 WHERE id = $1`, id, now); err != nil {
		return fmt.Errorf("ledger: collected provider batch %d: %w", id, err)
	}
	return nil
}

// lineJobs runs a line update returning job ids.
func lineJobs(ctx context.Context, db DBTX, what string, id int64, update string, args ...any) ([]int64, error) {
	rows, err := db.Query(ctx, update, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: %s of provider batch %d: %w", what, id, err)
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("ledger: %s of provider batch %d: %w", what, id, err)
	}
	return jobs, nil
}

// ReturnLinesPending gives the lines of provider batch id still submitted
// back to pending (sent in a later batch, waiting from now), and returns
// their jobs.
func ReturnLinesPending(ctx context.Context, db DBTX, id int64) ([]int64, error) {
	return lineJobs(ctx, db, "give back the lines", id, `UPDATE triage_provider_batch_line SET state = 'pending', provider_batch = NULL, pending_since = now()
		WHERE provider_batch = $1 AND state = 'submitted' RETURNING job_id`, id)
}

// MarkLinesNotRun marks the lines of provider batch id still submitted as
// not run (their jobs decide), and returns their jobs.
func MarkLinesNotRun(ctx context.Context, db DBTX, id int64) ([]int64, error) {
	return lineJobs(ctx, db, "mark the lines not run", id, `UPDATE triage_provider_batch_line SET state = 'not_run'
		WHERE provider_batch = $1 AND state = 'submitted' RETURNING job_id`, id)
}

// AnswerLines gives every line of provider batch id still submitted the
// answer ans (a BatchLineAnswer as JSON), and returns their jobs.
func AnswerLines(ctx context.Context, db DBTX, id int64, ans []byte) ([]int64, error) {
	return lineJobs(ctx, db, "answer the lines", id, `UPDATE triage_provider_batch_line SET state = 'answered', observation = $2, answered_at = now()
		WHERE provider_batch = $1 AND state = 'submitted' RETURNING job_id`, id, ans)
}

// AnswerLinesByID gives the lines of provider batch id still submitted
// whose custom ids are customIDs the answers (BatchLineAnswer JSON), and
// returns their jobs.
func AnswerLinesByID(ctx context.Context, db DBTX, id int64, customIDs []string, answers [][]byte) ([]int64, error) {
	return lineJobs(ctx, db, "answer lines", id, `UPDATE triage_provider_batch_line l SET state = 'answered', observation = v.obs, answered_at = now()
				FROM unnest($2::text[], $3::jsonb[]) AS v(custom_id, obs)
				WHERE l.provider_batch = $1 AND l.custom_id = v.custom_id AND l.state = 'submitted'
				RETURNING l.job_id`, id, customIDs, answers)
}

// StoreLineOutcomes writes, to the lines of provider batch id still
// submitted whose custom ids are customIDs, the outcome of each: state
// answered (with its answer), not_run, or pending (back to wait for a new
// batch, from now), and returns their jobs. A line not submitted any more
// is left alone, so a collection cut midway resumes without writing a line
// twice.
func StoreLineOutcomes(ctx context.Context, db DBTX, id int64, customIDs, states []string, answers [][]byte) ([]int64, error) {
	return lineJobs(ctx, db, "store results", id, `UPDATE triage_provider_batch_line l SET state = v.state, observation = v.obs,
					answered_at = CASE WHEN v.state = 'answered' THEN now() END,
					provider_batch = CASE WHEN v.state = 'pending' THEN NULL ELSE l.provider_batch END,
					pending_since = CASE WHEN v.state = 'pending' THEN now() ELSE l.pending_since END
				FROM unnest($2::text[], $3::text[], $4::jsonb[]) AS v(custom_id, state, obs)
				WHERE l.provider_batch = $1 AND l.custom_id = v.custom_id AND l.state = 'submitted'
				RETURNING l.job_id`, id, customIDs, states, answers)
}

// OrphanLine is an answered line whose job is gone (cancelled or deleted by
// hand) and whose attempt is still an intent.
type OrphanLine struct {
	ID, AttemptID int64
	// Answer is the line's BatchLineAnswer, as JSON.
	Answer []byte
	// Model is the attempt's.
	Model string
}

// LockOrphanLines locks (FOR UPDATE SKIP LOCKED, until tx ends) up to
// limit of key's answered lines whose job, in riverJob (rivertable.Job),
// can no longer run and whose attempt is still an intent: the provider
// billed them and nobody applies them.
func LockOrphanLines(ctx context.Context, tx DBTX, key, riverJob string, limit int) ([]OrphanLine, error) {
	rows, err := tx.Query(ctx, `SELECT l.id, l.attempt_id, l.observation, a.model
			FROM triage_provider_batch_line l JOIN triage_attempt a ON a.id = l.attempt_id
			WHERE l.key = $1 AND l.state = 'answered' AND a.status = 'intent' AND NOT `+liveJob(riverJob)+`
			ORDER BY l.id LIMIT $2 FOR UPDATE OF l SKIP LOCKED`, key, limit)
	if err != nil {
		return nil, fmt.Errorf("ledger: answered lines of gone jobs of key %q: %w", key, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[OrphanLine])
	if err != nil {
		return nil, fmt.Errorf("ledger: answered lines of gone jobs of key %q: %w", key, err)
	}
	return out, nil
}

// DatabaseNow is the database's clock: the one every process of a fleet
// reads the same, whatever its host's clock says.
func DatabaseNow(ctx context.Context, db DBTX) (time.Time, error) {
	var now time.Time
	if err := db.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("ledger: the database's clock: %w", err)
	}
	return now, nil
}
