package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/triage-dev/triage/classify"
)

// The lines of provider batches (migration 012), as a batch-mode job sees
// its own: the job writes its line (AddBatchLine), the key's submitter
// sends it in a provider batch and writes what came back, the job applies
// that (CloseBatchLine). The submitter's statements on its provider
// batches and their lines are in providerbatch.go.

// Batch line states (triage_provider_batch_line.state).
const (
	LinePending   = "pending"
	LineSubmitted = "submitted"
	LineAnswered  = "answered"
	LineNotRun    = "not_run"
	LineApplied   = "applied"
)

// ReasonBatchNotRun is the outcome reason of a batch attempt whose line
// never ran (expired, canceled, missing from the results) and is sent
// another way (synchronously, in auto mode): not billed, not counted
// against max_attempts.
const ReasonBatchNotRun = "batch_not_run"

// BatchLinesNotRun counts a batch's batch attempts the provider never ran
// (ReasonBatchNotRun): the run summary explains them, as the class table
// counts them as throttled calls that cost nothing.
func BatchLinesNotRun(ctx context.Context, db DBTX, batch string) (int, error) {
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM triage_attempt WHERE batch = $1 AND reason = $2`,
		batch, ReasonBatchNotRun).Scan(&n); err != nil {
		return 0, fmt.Errorf("ledger: batch lines not run of %q: %w", batch, err)
	}
	return n, nil
}

// # Open lines
//
// A record's line is open from AddBatchLine until the job has acted on it
// (applied). While it is open the provider may still bill it (submitted)
// or has billed it (answered): the one rule, which every path that moves,
// resends, requeues or ends a record asks through BatchLine.Hold, is that
// a record with an open line in a live provider batch, or holding a paid
// answer not yet applied, is neither moved to a fallback, resent
// synchronously, requeued, nor closed or dead-lettered before its answer is
// collected, and that answer is decoded and priced with the key and model
// that sent it (BatchLine.Key, BatchLine.Model). A line not sent yet
// (pending, not_run) bills nothing: it is taken back (TakeBackBatchLine)
// before its record goes another way.
//
// A paid answer whose job is gone (cancelled or deleted by hand, River's
// CLI or UI, while its line was live) stays held: the key's submitter
// finishes its attempt at the answer's real cost (ReasonJobGone) but does
// not close the line, and a requeue of the record gives the line to the
// record's new job (RecordLine.OnRequeue, AdoptBatchLine), which applies
// the answer with no call. Retention closes held answers nobody requeued
// (ledger.Prune).

// LineHold is what a record's open line allows (BatchLine.Hold).
type LineHold int

const (
	// HoldNone: no open line; the record may go any way.
	HoldNone LineHold = iota
	// HoldUnsent: a line in no live provider batch (pending, not_run):
	// nothing was billed; it is taken back before the record goes another
	// way.
	HoldUnsent
	// HoldLive: a line in a live provider batch (submitted): its answer
	// will come and be billed. The record waits for it.
	HoldLive
	// HoldAnswered: a paid answer not applied yet. The record's job
	// applies it before anything else.
	HoldAnswered
)

func (h LineHold) String() string {
	switch h {
	case HoldUnsent:
		return "unsent"
	case HoldLive:
		return "live"
	case HoldAnswered:
		return "answered"
	}
	return "none"
}

// Hold is the line's LineHold: HoldNone for no line (ID 0) or an applied
// one.
func (l BatchLine) Hold() LineHold {
	if l.ID == 0 {
		return HoldNone
	}
	switch l.State {
	case LinePending, LineNotRun:
		return HoldUnsent
	case LineSubmitted:
		return HoldLive
	case LineAnswered:
		return HoldAnswered
	}
	return HoldNone
}

// BatchLine is a job's open line (not applied), with its triage batch's
// deadline.
type BatchLine struct {
	ID        int64
	State     string
	AttemptID int64
	// Key and Model sent the line (its key, its attempt's model): its answer
	// is decoded with that key's format and priced at that model's prices,
	// whatever model the job is on now.
	Key, Model string
	// ProviderBatch is the provider's id of the batch the line is in ("":
	// none, or not created yet).
	ProviderBatch string
	// Answer is set once the provider answered the line.
	Answer *BatchLineAnswer
	// Deadline of the job's triage batch; nil: none.
	Deadline *time.Time
}

// BatchLineAnswer is what the submitter stores for an answered line
// (triage_provider_batch_line.observation).
type BatchLineAnswer struct {
	// Observation is the line's embedded HTTP answer (phase response):
	// status, headers, body, as a synchronous call would have observed.
	Observation classify.Observation `json:"observation"`
	// RejectReason, when set, says the provider refused the line as part of
	// the whole batch (OpenAI validation), with this dead-letter reason
	// ("batch_validation:<code>"); RejectDetail is the provider's message.
	RejectReason string `json:"reject_reason,omitempty"`
	RejectDetail string `json:"reject_detail,omitempty"`
	// RejectCode is the vendor's error code for RejectReason (the dead
	// letter's vendor_code).
	RejectCode string `json:"reject_code,omitempty"`
	// Refused marks an Observation that is the provider's refusal of the
	// whole batch's create (naming no line), given to each line: the line
	// never ran, so it is not a line of a result (the safety net does not
	// count it).
	Refused bool `json:"refused,omitempty"`
}

// NewBatchLine is a line AddBatchLine writes.
type NewBatchLine struct {
	Key, Batch, RecordID string
	JobID                int64
	CustomID             string // the idempotency key
	AttemptID            int64
	Body                 json.RawMessage // the vendor request body
}

// QueueOpenBatchLine queues, on b, the read of jobID's open line and of the
// deadline of its triage batch; dst.ID stays 0 when the job has no open
// line.
func QueueOpenBatchLine(b *pgx.Batch, dst *BatchLine, jobID int64, batch string) {
	b.Queue(openLineSQL, jobID, batch).QueryRow(func(row pgx.Row) error {
		l, err := scanOpenLine(row)
		if err != nil {
			return err
		}
		*dst = l
		return nil
	})
}

const openLineSQL = `SELECT l.id, l.state, l.attempt_id, l.observation, t.deadline, l.key, a.model, pb.provider_batch_id
		FROM (SELECT 1) one
		LEFT JOIN triage_provider_batch_line l ON l.job_id = $1 AND l.state <> 'applied'
		LEFT JOIN triage_attempt a ON a.id = l.attempt_id
		LEFT JOIN triage_provider_batch pb ON pb.id = l.provider_batch
		LEFT JOIN triage_batch t ON t.id = $2
		LIMIT 1`

func scanOpenLine(row pgx.Row) (BatchLine, error) {
	var (
		id, attempt             *int64
		state, key, model, pbID *string
		obs                     []byte
	)
	var l BatchLine
	if err := row.Scan(&id, &state, &attempt, &obs, &l.Deadline, &key, &model, &pbID); err != nil {
		return BatchLine{}, fmt.Errorf("ledger: open batch line: %w", err)
	}
	if id == nil {
		return l, nil
	}
	l.ID, l.State = *id, *state
	if attempt != nil {
		l.AttemptID = *attempt
	}
	if key != nil {
		l.Key = *key
	}
	if model != nil {
		l.Model = *model
	}
	if pbID != nil {
		l.ProviderBatch = *pbID
	}
	if obs != nil {
		l.Answer = &BatchLineAnswer{}
		if err := json.Unmarshal(obs, l.Answer); err != nil {
			return BatchLine{}, fmt.Errorf("ledger: open batch line %d: answer: %w", l.ID, err)
		}
	}
	return l, nil
}

// OpenBatchLine reads jobID's open line (ID 0: none), as
// QueueOpenBatchLine does, for a path that decides without the admission
// round trip.
func OpenBatchLine(ctx context.Context, db DBTX, jobID int64, batch string) (BatchLine, error) {
	return scanOpenLine(db.QueryRow(ctx, openLineSQL, jobID, batch))
}

// OpenBatchLines reads the open lines of the given jobs, by job id (jobs
// without one are absent), without their answers or deadlines: for the
// fallback mover, which only asks their Hold.
func OpenBatchLines(ctx context.Context, db DBTX, jobIDs []int64) (map[int64]BatchLine, error) {
	rows, err := db.Query(ctx, `SELECT l.job_id, l.id, l.state, coalesce(l.attempt_id, 0), l.key
		FROM triage_provider_batch_line l WHERE l.job_id = ANY($1) AND l.state <> 'applied'`, jobIDs)
	if err != nil {
		return nil, fmt.Errorf("ledger: open batch lines: %w", err)
	}
	defer rows.Close()
	out := map[int64]BatchLine{}
	for rows.Next() {
		var (
			job int64
			l   BatchLine
		)
		if err := rows.Scan(&job, &l.ID, &l.State, &l.AttemptID, &l.Key); err != nil {
			return nil, fmt.Errorf("ledger: open batch lines: %w", err)
		}
		out[job] = l
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: open batch lines: %w", err)
	}
	return out, nil
}

// ReasonJobGone is the ledger reason of a batch attempt whose line the
// provider answered after its job was cancelled or deleted by hand: the
// provider billed it (the cost is real). The answer stays held for a
// requeue of the record (AdoptBatchLine).
const ReasonJobGone = "job_gone"

// RecordLine is a record's open line that holds it (HoldLive or
// HoldAnswered), whatever job wrote it: for a requeue, which makes a new
// job for the record.
type RecordLine struct {
	ID              int64
	Batch, RecordID string
	JobID           int64
	State           string
	// ProviderBatch is the provider's batch id ("" before its create
	// answered).
	ProviderBatch string
}

// RequeueLine is what a requeue does with a record's open line
// (RecordLine.OnRequeue).
type RequeueLine int

const (
	// RequeueRefused: the line is in a live provider batch, or its job can
	// still run and apply its answer; a new job would send the record
	// again while the provider bills the first line.
	RequeueRefused RequeueLine = iota
	// RequeueAdopt: a paid answer whose job is gone; the record's new job
	// takes the line (AdoptBatchLine) and applies the answer, no call.
	RequeueAdopt
)

// OnRequeue is the open-line rule for a requeue of the line's record, given
// whether the line's job can still run.
func (l RecordLine) OnRequeue(jobLive bool) RequeueLine {
	if l.State == LineAnswered && !jobLive {
		return RequeueAdopt
	}
	return RequeueRefused
}

// AdoptBatchLine gives an answered line to jobID, the record's new job (a
// requeue, RecordLine.OnRequeue): the job applies the paid answer as its
// own. The answer's hold restarts (answered_at), so retention does not
// drop it before the new job runs. It reports false when the line is no
// longer answered.
func AdoptBatchLine(ctx context.Context, db DBTX, lineID, jobID int64) (bool, error) {
	tag, err := db.Exec(ctx, `UPDATE triage_provider_batch_line SET job_id = $2, answered_at = now()
		WHERE id = $1 AND state = '`+LineAnswered+`'`, lineID, jobID)
	if err != nil {
		return false, fmt.Errorf("ledger: adopt batch line %d for job %d: %w", lineID, jobID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// HeldRecords returns the open lines, in a live provider batch or holding
// a paid answer, of the given records of batch, by record id order.
func HeldRecords(ctx context.Context, db DBTX, batch string, recordIDs []string) ([]RecordLine, error) {
	rows, err := db.Query(ctx, `SELECT l.id, l.batch, l.record_id, l.job_id, l.state, coalesce(pb.provider_batch_id, '')
		FROM triage_provider_batch_line l
		LEFT JOIN triage_provider_batch pb ON pb.id = l.provider_batch
		WHERE l.batch = $1 AND l.record_id = ANY($2) AND l.state IN ('`+LineSubmitted+`', '`+LineAnswered+`')
		ORDER BY l.record_id, l.id`, batch, recordIDs)
	if err != nil {
		return nil, fmt.Errorf("ledger: open lines of batch %q: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RecordLine, error) {
		var l RecordLine
		err := r.Scan(&l.ID, &l.Batch, &l.RecordID, &l.JobID, &l.State, &l.ProviderBatch)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: open lines of batch %q: %w", batch, err)
	}
	return out, nil
}

// ErrLineExists: the job has an open line already (AddBatchLine).
var ErrLineExists = errors.New("ledger: the job has an open batch line")

// AddBatchLine writes a pending line; ErrLineExists when the job has an
// open one.
func AddBatchLine(ctx context.Context, db DBTX, l NewBatchLine) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, `INSERT INTO triage_provider_batch_line
			(key, job_id, batch, record_id, custom_id, attempt_id, body)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (job_id) WHERE state <> 'applied' DO NOTHING
		RETURNING id`, l.Key, l.JobID, l.Batch, l.RecordID, l.CustomID, l.AttemptID, l.Body).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrLineExists
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: add batch line for job %d: %w", l.JobID, err)
	}
	return id, nil
}

// CloseLineSQL is the SET list of every statement that closes a line
// (state applied): the provider's answer is dropped (the job stored what it
// made of it, a result or a dead letter, in the same transaction), and so is
// the rendered request body, except on a line still in a provider batch
// (submitted): the submitter sends those bodies again when it recovers a
// provider batch a crash left unsent. The retention service drops those
// bodies once their provider batch is collected (StripClosedLines).
const CloseLineSQL = `state = 'applied', observation = NULL,
	body = CASE WHEN state = 'submitted' THEN body ELSE 'null'::jsonb END`

// CloseBatchLine marks a line applied: the job has acted on it.
func CloseBatchLine(ctx context.Context, db DBTX, lineID int64) error {
	if _, err := db.Exec(ctx, `UPDATE triage_provider_batch_line SET `+CloseLineSQL+` WHERE id = $1`, lineID); err != nil {
		return fmt.Errorf("ledger: close batch line %d: %w", lineID, err)
	}
	return nil
}

// RequeueBatchLine puts a line that did not run back in the queue for the
// next provider batch, with the same attempt (nothing was billed).
func RequeueBatchLine(ctx context.Context, db DBTX, lineID int64) error {
	if _, err := db.Exec(ctx, `UPDATE triage_provider_batch_line SET state = 'pending', provider_batch = NULL, pending_since = now()
		WHERE id = $1 AND state = 'not_run'`, lineID); err != nil {
		return fmt.Errorf("ledger: requeue batch line %d: %w", lineID, err)
	}
	return nil
}

// TakeBackBatchLine closes a line that is not in a live provider batch
// (pending, or not run) so that its job can call synchronously, and
// finishes its attempt as not run (no cost, not counted against
// max_attempts). It reports false when the submitter took the line into a
// provider batch first.
func TakeBackBatchLine(ctx context.Context, db DBTX, lineID, attemptID int64) (bool, error) {
	var took bool
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE triage_provider_batch_line SET `+CloseLineSQL+`
			WHERE id = $1 AND state IN ('pending', 'not_run')`, lineID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		took = true
		if attemptID == 0 {
			return nil
		}
		// Throttled: the class that counts no attempt and makes the next
		// send no retry (Prior.JobCalls, JobLast.Retry).
		err = FinishAttempt(ctx, tx, attemptID, Outcome{Status: AttemptFailed, Class: classify.Throttled, Reason: ReasonBatchNotRun})
		if errors.Is(err, ErrAttemptFinished) {
			return nil
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("ledger: take back batch line %d: %w", lineID, err)
	}
	return took, nil
}

// CloseLinesOfGoneJobs closes key's lines that will not be sent again
// because their job was cancelled or deleted by hand (pending or not run,
// and no job of riverJob, River's job table quoted as rivertable.Job
// gives it, that can still run has the line's id), and settles their
// attempts as not run ($0) by FinishAttempt, as TakeBackBatchLine does, so
// the ledger does not carry them as possibly billed. One transaction.
func CloseLinesOfGoneJobs(ctx context.Context, db DBTX, riverJob, key string) error {
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE triage_provider_batch_line l SET `+CloseLineSQL+`
			WHERE l.key = $1 AND l.state IN ('pending', 'not_run')
			  AND NOT EXISTS (SELECT 1 FROM `+riverJob+` j
				WHERE j.id = l.job_id AND j.state NOT IN ('cancelled', 'completed', 'discarded'))
			RETURNING l.attempt_id`, key)
		if err != nil {
			return err
		}
		attempts, err := pgx.CollectRows(rows, pgx.RowTo[*int64])
		if err != nil {
			return err
		}
		for _, id := range attempts {
			if id == nil || *id == 0 {
				continue
			}
			err := FinishAttempt(ctx, tx, *id, Outcome{Status: AttemptFailed, Class: classify.Throttled, Reason: ReasonBatchNotRun})
			if err != nil && !errors.Is(err, ErrAttemptFinished) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ledger: close lines of gone jobs of key %q: %w", key, err)
	}
	return nil
}

// KeyHasOpenBatchWork reports whether key has a provider batch not
// collected or abandoned, or a line not applied: what a collect-only
// submitter (a key no pipeline sends in batch mode now) still has to
// finish.
func KeyHasOpenBatchWork(ctx context.Context, db DBTX, key string) (bool, error) {
	var open bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM triage_provider_batch
			WHERE key = $1 AND state NOT IN ('collected', 'abandoned'))
		OR EXISTS (SELECT 1 FROM triage_provider_batch_line WHERE key = $1 AND state <> 'applied')`, key).Scan(&open)
	if err != nil {
		return false, fmt.Errorf("ledger: open batch work of key %q: %w", key, err)
	}
	return open, nil
}

// ProviderBatchRecorded reports whether the provider batch id is recorded
// on a provider batch row of key other than except: the batch is that row's,
// so a look-up for except's batch (batchapi.Client.Find) must not take it.
func ProviderBatchRecorded(ctx context.Context, db DBTX, key, providerID string, except int64) (bool, error) {
	var ok bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM triage_provider_batch
		WHERE key = $1 AND provider_batch_id = $2 AND id <> $3)`, key, providerID, except).Scan(&ok); err != nil {
		return false, fmt.Errorf("ledger: is provider batch %s recorded: %w", providerID, err)
	}
	return ok, nil
}

// MarkProviderBatchServed records that provider batch id answered a line
// with a success (a 2xx): the account served it, so a rejection of one of
// its lines is about its record, not the key (LineBatchServed). The
// submitter calls it at collection before it stores the first line's
// answer, so before any job can apply one: the lines of one provider batch
// are answered together and applied in no order, and a rejected line
// applied before the good one must read served too.
func MarkProviderBatchServed(ctx context.Context, db DBTX, id int64) error {
	if _, err := db.Exec(ctx, `UPDATE triage_provider_batch SET served = true WHERE id = $1 AND NOT served`, id); err != nil {
		return fmt.Errorf("ledger: mark provider batch %d served: %w", id, err)
	}
	return nil
}

// LineBatchServed reports whether the provider batch of line id answered a
// line with a success (MarkProviderBatchServed): one row read, however many
// lines the batch holds. A line in no provider batch reads false.
func LineBatchServed(ctx context.Context, db DBTX, id int64) (bool, error) {
	var served bool
	err := db.QueryRow(ctx, `SELECT coalesce((SELECT p.served FROM triage_provider_batch_line l
		JOIN triage_provider_batch p ON p.id = l.provider_batch WHERE l.id = $1), false)`, id).Scan(&served)
	if err != nil {
		return false, fmt.Errorf("ledger: did the provider batch of line %d serve a line: %w", id, err)
	}
	return served, nil
}
