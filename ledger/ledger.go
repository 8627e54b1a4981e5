package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/triage-dev/triage/classify"
)

// DBTX is what every ledger function runs its SQL on. *pgxpool.Pool and
// pgx.Tx both satisfy it, so the worker can write the ledger inside the same
// transaction as River's JobCompleteTx or InsertManyFastTx.
//
// Begin is used by functions that write several statements (CreateBatch): on a
// pool it opens a transaction, on a pgx.Tx a savepoint, so they are atomic
// either way. CopyFrom is used for bulk record inserts.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

var (
	// ErrNotFound: no batch, attempt or dead letter with that id.
	ErrNotFound = errors.New("ledger: not found")
	// ErrBatchExists: CreateBatch was given an id that is already in use.
	ErrBatchExists = errors.New("ledger: batch already exists")
	// ErrDuplicateRecord: CreateBatch was given two records with the same id.
	ErrDuplicateRecord = errors.New("ledger: duplicate record id in batch")
	// ErrAttemptFinished: FinishAttempt on an attempt that is no longer an
	// intent (finished already, or resolved by a later attempt).
	ErrAttemptFinished = errors.New("ledger: attempt already finished")
	// ErrHasResult: AddDeadLetter on a record that already has a result. The
	// record is done; nothing was written.
	ErrHasResult = errors.New("ledger: the record has a result")
)

// BatchState is a batch's state as `triage status` prints it.
type BatchState string

const (
	BatchRunning         BatchState = "running"
	BatchSettled         BatchState = "settled" // completed + dead_lettered = total
	BatchPausedExhausted BatchState = "paused_exhausted"
	BatchPausedBudget    BatchState = "paused_budget"
	// BatchPaused: paused by hand (`triage batch pause`); its jobs stay
	// queued and make no call until `triage batch resume`.
	BatchPaused BatchState = "paused"
	// BatchCancelled: cancelled by hand (`triage batch cancel`) and not
	// settled yet: its calls in flight are finishing; every other record
	// ends in a dead letter with reason ReasonCancelled. Once every record
	// has ended the batch reads settled.
	BatchCancelled BatchState = "cancelled"
)

// Batch is one enqueued batch.
type Batch struct {
	ID       string
	Pipeline string
	Key      string
	// BudgetUSD caps the batch's spend; nil: no cap.
	BudgetUSD *float64
	// Total is set by CreateBatch to len(records).
	Total int
	// State as stored (running or a paused state); BatchStatus derives settled.
	State BatchState
	// SpentUSD is the billed cost of the batch's attempts so far: the folded
	// counter plus the costs not folded yet (batchSpentSQL).
	SpentUSD  float64
	CreatedAt time.Time
	// Deadline is when the whole batch must be done (a pipeline's deadline
	// or `triage run --deadline`, resolved at enqueue); nil: none.
	Deadline *time.Time
}

// Record is one input record of a batch, kept so export and requeue can
// rebuild it.
type Record struct {
	ID   string
	Line int // 1-based line number in the input file
	Data json.RawMessage
}

// AttemptStatus is the lifecycle of one call in the ledger.
type AttemptStatus string

const (
	// AttemptIntent: written before the request is sent, not finished yet. An
	// intent row that outlives its worker (crash) is treated as ambiguous.
	AttemptIntent AttemptStatus = "intent"
	// AttemptOK: the call succeeded.
	AttemptOK AttemptStatus = "ok"
	// AttemptFailed: the call failed and was certainly not billed beyond
	// what CostUSD says (a response arrived).
	AttemptFailed AttemptStatus = "failed"
	// AttemptPossiblyBilled: the request was sent and no response arrived
	// (timeout, reset, cut stream): the provider may have billed it.
	AttemptPossiblyBilled AttemptStatus = "possibly_billed"
	// AttemptResolved: was possibly_billed or a stale intent; a later attempt
	// with the same idempotency key succeeded, so it is settled.
	AttemptResolved AttemptStatus = "resolved"
)

// ReasonWorkerStopped is the outcome reason of a call cut by the worker's
// own stop (shutdown, River's job timeout) rather than answered: such a call
// does not count against the pipeline's max_attempts (Prior.JobCalls).
const ReasonWorkerStopped = "worker_stopped"

// Intent is the row written before a request is sent.
type Intent struct {
	Batch          string
	RecordID       string
	JobID          int64
	Attempt        int // River's attempt number
	Key            string
	Model          string
	IdempotencyKey string
	RequestHash    string
	IsRetry        bool
	// EstCostUSD is the estimated cost of the call (prompt tokens and max
	// output at the model's prices); counted as possibly_billed_usd while the
	// attempt is ambiguous.
	EstCostUSD float64
	// InFlightFor is how long after its start an intent of this batch can
	// still be a call in flight: the job timeout (the key's timeout plus the
	// worker's margin). ReserveAttempt holds younger intents as reservations
	// that may still come back cheaper, and counts older ones, whose run
	// died, as spent at their estimate. Default InFlightForDefault.
	InFlightFor time.Duration
	// Now pins started_at; zero: the database clock.
	Now time.Time
	// Change names how the request was changed before it was sent (a
	// Change* value); "": sent as rendered.
	Change string
	// Mode is how the call reaches the model: ModeSync ("" means sync) or
	// ModeBatch (a line of a provider batch, billed at the batch price).
	Mode string
}

// Attempt modes (triage_attempt.mode).
const (
	ModeSync  = "sync"
	ModeBatch = "batch"
)

func modeArg(m string) string {
	if m == "" {
		return ModeSync
	}
	return m
}

// How a request was changed for its one changed retry (Intent.Change,
// Attempt.Change, ResultRow.Change); several are joined by "+".
const (
	// ChangeTruncated: the record's longest strings were shortened to fit
	// the model's context.
	ChangeTruncated = "truncated"
	// ChangeDroppedJSON: sent without JSON mode, which the endpoint refused.
	ChangeDroppedJSON = "dropped_json_mode"
)

// Truncated reports whether a change label includes ChangeTruncated.
func Truncated(change string) bool {
	for part := range strings.SplitSeq(change, "+") {
		if part == ChangeTruncated {
			return true
		}
	}
	return false
}

// InFlightForDefault is Intent.InFlightFor's default: the default key
// timeout (60 s) plus the worker's default job margin (30 s).
const InFlightForDefault = 90 * time.Second

// Outcome is what FinishAttempt records after the call.
type Outcome struct {
	Status       AttemptStatus  // AttemptOK, AttemptFailed or AttemptPossiblyBilled
	Class        classify.Class // the verdict's class; always recorded
	HTTPStatus   int            // 0: no status line
	VendorCode   string         // "" for none
	Reason       string         // "" for none
	InputTokens  int
	OutputTokens int
	CostUSD      float64
	// Now pins finished_at; zero: the database clock.
	Now time.Time
	// Partial: a stream cut midway (stream.go).
	Partial *Partial
	// SyncCostUSD, for a batch attempt, is what the same tokens would have
	// cost synchronously (the saving is CostUSD's difference to it); nil
	// for a synchronous one.
	SyncCostUSD *float64
}

// Attempt is one row of the attempt ledger (`triage ledger`).
type Attempt struct {
	ID             int64         `json:"id"`
	Batch          string        `json:"batch"`
	RecordID       string        `json:"record_id"`
	JobID          int64         `json:"job_id"`
	Attempt        int           `json:"attempt"`
	Key            string        `json:"key"`
	Model          string        `json:"model"`
	IdempotencyKey string        `json:"idempotency_key"`
	RequestHash    string        `json:"request_hash"`
	Status         AttemptStatus `json:"status"`
	Class          *string       `json:"class"`
	HTTPStatus     *int          `json:"http_status"`
	VendorCode     *string       `json:"vendor_code"`
	Reason         *string       `json:"reason"`
	InputTokens    int           `json:"input_tokens"`
	OutputTokens   int           `json:"output_tokens"`
	CostUSD        float64       `json:"cost_usd"`
	EstCostUSD     float64       `json:"est_cost_usd"`
	// PartialText is what a cut stream delivered before it broke; nil when
	// the call was not a cut stream.
	PartialText *string    `json:"partial_text"`
	IsRetry     bool       `json:"is_retry"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	// Change: how the request was changed before it was sent; "" (omitted):
	// sent as rendered.
	Change string `json:"change,omitempty"`
	// Mode is how the attempt reached the model: ModeSync (a call of its
	// own) or ModeBatch (a line of a provider batch, billed at the batch
	// price).
	Mode string `json:"mode"`
	// Resolution is how the call came out when its answer was lost; ""
	// (omitted) when its answer arrived.
	Resolution Resolution `json:"resolution,omitempty"`
}

// AttemptFilter selects attempts for ListAttempts; empty fields match all.
type AttemptFilter struct {
	Batch string
	Key   string
	// RecordID: only this record's attempts (with Batch).
	RecordID string
	// Limit caps the rows returned, newest first; 0: AttemptLimitDefault.
	Limit int
}

// AttemptLimitDefault is ListAttempts' row cap when AttemptFilter.Limit is 0.
const AttemptLimitDefault = 1000

// Prior is what the ledger knows about earlier attempts under one
// idempotency key, read before a retry.
type Prior struct {
	// Attempts under the key so far, in any status.
	Attempts int
	// OKAttemptID is the id of an attempt that finished ok; 0: none. When
	// set, do not call the provider again.
	OKAttemptID int64
	// ResultStored: a result row references OKAttemptID.
	ResultStored bool
	// Ambiguous counts possibly_billed and intent rows (an intent row seen
	// here belongs to a worker that died between intent and outcome, since
	// PriorOutcome is read before this attempt's own BeginAttempt).
	Ambiguous int
	// JobAmbiguous is the part of Ambiguous made by the job PriorOutcomeForJob
	// was asked about. A record requeued by hand is a new job, so its
	// ambiguous-retry allowance starts again, while a crashed job rescued by
	// River keeps its id and its count.
	JobAmbiguous int
	// JobLast is what the job's latest attempt under the key came to: none,
	// a class, or unfinished (its worker died between intent and outcome).
	// A send after a transient, ambiguous or unfinished attempt is a retry;
	// a send after a throttle or an exhausted key is not.
	JobLast LastAttempt
	// JobCalls counts the job's calls that spend one of the pipeline's
	// max_attempts: those that ended transient or ambiguous, or never ended
	// (a crash). Runs that ended in the worker's own errors made no call and
	// are not counted, nor are throttled or exhausted calls, nor calls cut
	// by a shutdown.
	JobCalls int
	// DeadLettered: the record has a dead letter not requeued. A job that
	// finds one was dead-lettered by a run whose cancel did not land (a
	// crash): it must not call again.
	DeadLettered bool
	// PendingResponse: a send under the key whose answer was lost left a
	// background response running at the provider, its id on the attempt
	// (the Responses API's background mode): the next run polls it, which
	// is no resend.
	PendingResponse bool
	// BilledUSD is the cost recorded under the key.
	BilledUSD float64
	// PossiblyBilledUSD is the estimated cost of the ambiguous attempts.
	PossiblyBilledUSD float64
}

// Dead-letter reasons for records whose job a person took out of the queue
// (River's CLI or UI) before the worker decided an outcome: the job was
// cancelled, or deleted. The worker's sweep writes them so the batch can
// settle; Status.Cancelled counts them.
const (
	ReasonCancelledByHand = "cancelled_by_hand"
	ReasonJobMissing      = "job_missing"
	// ReasonCancelled: the record's batch was cancelled by hand (`triage
	// batch cancel`) before the record had an outcome.
	ReasonCancelled = "cancelled"
)

// LastAttempt is what a job's latest attempt came to (Prior.JobLast).
type LastAttempt struct {
	// Seen: the job has an attempt under the key.
	Seen bool
	// Unfinished: that attempt is still an intent (its worker died mid-call).
	Unfinished bool
	// Class is its verdict's class when it finished.
	Class classify.Class
}

// Retry reports whether a new send after this attempt is a retry: after a
// transient, ambiguous or unfinished attempt.
func (l LastAttempt) Retry() bool {
	return l.Seen && (l.Unfinished || l.Class == classify.Transient || l.Class == classify.Ambiguous)
}

// Status is one batch's progress, in the `triage status --json` shape.
type Status struct {
	Batch        string  `json:"batch"`
	Pipeline     string  `json:"pipeline"`
	Total        int     `json:"total"`
	Completed    int     `json:"completed"`
	DeadLettered int     `json:"dead_lettered"`
	Pending      int     `json:"pending"`
	Calls        int     `json:"calls"`
	SpendUSD     float64 `json:"spend_usd"`
	// PossiblyBilledUSD: attempts whose outcome is unknown (possibly_billed,
	// or a synchronous call's intent not finished); batch-mode lines in a
	// provider batch are in BatchReservedUSD instead.
	PossiblyBilledUSD float64    `json:"possibly_billed_usd"`
	State             BatchState `json:"state"`
	// Cancelled counts the dead letters (already in DeadLettered) of records
	// whose job was cancelled or deleted by hand: reasons
	// ReasonCancelledByHand and ReasonJobMissing.
	Cancelled int `json:"cancelled"`
	// Models counts the completed records by the model that answered them;
	// Fallback is how many records moved to a fallback model (counted
	// against the pipeline's fallback_max_share).
	Models   map[string]int `json:"models"`
	Fallback int            `json:"fallback"`
	// Deadline is when the batch must be done; omitted when it has none.
	Deadline *time.Time `json:"deadline,omitempty"`
	// ByMode splits calls and spend into sync calls and provider-batch
	// lines, and BatchSavedUSD is what the batch lines cost less than the
	// same tokens sync; both omitted when the batch has no batch-mode
	// attempt, so a sync-only batch reads as before.
	ByMode        []ModeUsage `json:"by_mode,omitempty"`
	BatchSavedUSD *float64    `json:"batch_saved_usd,omitempty"`
	// BatchReservedUSD is the estimated cost of the batch-mode lines still
	// waiting for their provider batch's answer (hours, at batch prices):
	// reserved against the budget, but not ambiguous, so not in
	// PossiblyBilledUSD. Omitted when zero.
	BatchReservedUSD float64 `json:"batch_reserved_usd,omitempty"`
	// StrayDuplicates counts the paid duplicates of the batch's records
	// (ReasonStrayDuplicate): lines a stray provider batch ran before its
	// cancel reached the provider, billed, in SpendUSD (StrayDuplicateUSD
	// of it), never a record's result. Both omitted when none.
	StrayDuplicates   int     `json:"stray_duplicates,omitempty"`
	StrayDuplicateUSD float64 `json:"stray_duplicate_usd,omitempty"`
	// ProviderBatches are the provider batches in flight (not collected or
	// abandoned) holding lines of the batch, oldest first; omitted when none.
	ProviderBatches []ProviderBatchStatus `json:"provider_batches,omitempty"`
	// BatchLinesUnsent counts the batch's batch-mode lines in no provider
	// batch yet: written by their jobs and waiting for the key's submitter
	// to gather them into the next one (a run's lines are sent together,
	// once no new line has come for a while); omitted when none.
	BatchLinesUnsent int `json:"batch_lines_unsent,omitempty"`
	// Key is the batch's key, for joining it with the key's breaker; not part
	// of the JSON shape.
	Key string `json:"-"`
}

// KeyUsage is one key's activity since a moment: for the prepaid and
// spend-rate alerts and the fleet-wide retry budget.
type KeyUsage struct {
	Calls             int // attempts started
	Retries           int // attempts with IsRetry
	SpendUSD          float64
	PossiblyBilledUSD float64
}

// ClassUsage is what a set of attempts with one classifier class came to
// (UsageByClass). The JSON names are the shape of `triage ledger --json`.
type ClassUsage struct {
	// Class is the classifier class the attempt finished with; "" for
	// attempts with none recorded (in flight, or resolved before finishing).
	Class string `json:"class,omitempty"`
	Calls int    `json:"calls"`
	// Records counts distinct records (batch and record id).
	Records      int `json:"records"`
	Retries      int `json:"retries"`
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// SpendUSD is the billed cost.
	SpendUSD float64 `json:"spend_usd"`
	// PossiblyBilledUSD is the estimated cost of attempts still ambiguous
	// (possibly_billed, or an intent not finished). Batch-mode lines
	// waiting in a provider batch are in BatchReservedUSD instead, as in
	// Status: they are not lost calls but answers on their way.
	PossiblyBilledUSD float64 `json:"possibly_billed_usd"`
	// BatchReservedUSD is the estimated cost, at batch prices, of the
	// batch-mode lines still waiting for their answer. Omitted when none.
	BatchReservedUSD float64 `json:"batch_reserved_usd,omitempty"`
}

// ResultRow is one record of a batch with its stored output, for export.
type ResultRow struct {
	Record
	// Output is the stored result; nil when the record has none (pending or
	// dead-lettered).
	Output    json.RawMessage
	AttemptID int64 // 0 when Output is nil
	// Change of the attempt whose answer Output is; "": sent as rendered.
	Change string
	// Partial: Output is a cut stream's partial text, accepted by the
	// pipeline's accept_partial_min_chars.
	Partial bool
	// Model is the model that answered ("" when Output is nil): the
	// pipeline's own, or the fallback the record moved to.
	Model string
}

// DeadLetterRow is what AddDeadLetter writes.
type DeadLetterRow struct {
	Batch      string
	RecordID   string
	JobID      int64
	Pipeline   string
	Key        string
	Class      classify.Class
	Reason     string
	HTTPStatus int    // 0: none
	VendorCode string // "": none
	Attempts   int
	// Request is the rendered request body, without credentials.
	Request json.RawMessage
	// ErrorExcerpt is the vendor's error; AddDeadLetter passes it through Redact.
	ErrorExcerpt string
	// Rule is the classifier rule that decided the verdict
	// (classify.Verdict.Rule), "" when no classifier verdict led here.
	Rule string
	// Unknown is true when that verdict was a default (known:false).
	Unknown bool
	// Suspect says why the record may be fine and the key the problem ("":
	// it is not): SuspectSignal, SuspectStatus, SuspectUnknown or
	// SuspectSafetyNet.
	Suspect string
	// Now pins created_at; zero: the database clock.
	Now time.Time
}

// Why a dead letter is suspect (DeadLetterRow.Suspect, the suspect column).
const (
	// SuspectSignal: the class came from the signal layer, no vendor rule.
	SuspectSignal = "signal"
	// SuspectStatus: the class came from the HTTP status alone.
	SuspectStatus = "status"
	// SuspectUnknown: the class was a default no rule knew (known:false).
	SuspectUnknown = "unknown_error"
	// SuspectSafetyNet: the safety net held the key for this failure.
	SuspectSafetyNet = "safety_net"
)

// DeadLetter is one dead-lettered record with full detail (`triage dlq
// show`). It marshals to the list shape's fields plus the detail fields; use
// ListItem for the exact `triage dlq list --json` shape.
type DeadLetter struct {
	ID           int64
	Batch        string
	RecordID     string
	JobID        int64
	Pipeline     string
	Key          string
	Class        string
	Reason       string
	HTTPStatus   int    // 0: none
	VendorCode   string // "": none
	Attempts     int
	Request      json.RawMessage
	ErrorExcerpt string
	RequeuedAt   *time.Time
	CreatedAt    time.Time
	// Rule is the classifier rule that decided ("" if none); Unknown marks a
	// default verdict (known:false).
	Rule    string
	Unknown bool
	// Suspect is why the record may be fine ("" when it is not).
	Suspect string
}

// DeadLetterListItem is the exact `triage dlq list --json` element.
type DeadLetterListItem struct {
	ID        int64     `json:"id"`
	Batch     string    `json:"batch"`
	RecordID  string    `json:"record_id"`
	Class     string    `json:"class"`
	Reason    string    `json:"reason"`
	Status    *int      `json:"status"` // HTTP status or null
	Code      *string   `json:"code"`   // vendor code or null
	Attempts  int       `json:"attempts"`
	CreatedAt time.Time `json:"created_at"`
	// Suspect is why the record may be fine and the key the problem
	// ("signal", "status", "unknown_error", "safety_net"), null when the
	// class came from a vendor rule.
	Suspect *string `json:"suspect"`
}

// DeadLetterFilter selects dead letters; empty fields match all.
type DeadLetterFilter struct {
	Batch  string
	Class  string
	Reason string
	// IncludeRequeued lists requeued dead letters too. Default false: only
	// those still dead.
	IncludeRequeued bool
	// Unknown lists only dead letters whose verdict was a default
	// (known:false): the errors no rule knew.
	Unknown bool
	// Suspect lists only suspect dead letters (DeadLetter.Suspect).
	Suspect bool
}
