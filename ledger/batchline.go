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
// that (CloseBatchLine). The submitter's own bookkeeping is in
// worker/submitter.

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

// BatchLine is a job's open line (not applied), with its triage batch's
// deadline.
type BatchLine struct {
	ID        int64
	State     string
	AttemptID int64
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
	b.Queue(`SELECT l.id, l.state, l.attempt_id, l.observation, t.deadline
		FROM (SELECT 1) one
		LEFT JOIN triage_provider_batch_line l ON l.job_id = $1 AND l.state <> 'applied'
		LEFT JOIN triage_batch t ON t.id = $2
		LIMIT 1`, jobID, batch).QueryRow(func(row pgx.Row) error {
		var (
			id, attempt *int64
			state       *string
			obs         []byte
		)
		var l BatchLine
		if err := row.Scan(&id, &state, &attempt, &obs, &l.Deadline); err != nil {
			return fmt.Errorf("ledger: open batch line: %w", err)
		}
		if id != nil {
			l.ID, l.State = *id, *state
			if attempt != nil {
				l.AttemptID = *attempt
			}
			if obs != nil {
				l.Answer = &BatchLineAnswer{}
				if err := json.Unmarshal(obs, l.Answer); err != nil {
					return fmt.Errorf("ledger: open batch line %d: answer: %w", l.ID, err)
				}
			}
		}
		*dst = l
		return nil
	})
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
