package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/keys"
)

// Selection names dead letters: IDs, or a batch with optional class and
// reason filters, or the suspect ones (of one batch or all) (`triage dlq
// requeue ID... | --batch B [--class C] [--reason R] | --suspect [--batch
// B]`, and the dead-letter page's filters).
type Selection struct {
	IDs    []int64
	Batch  string
	Class  string
	Reason string
	// Suspect keeps only the suspect dead letters (ledger.DeadLetter.Suspect):
	// those whose class came from the safety net or the classifier's weakest
	// evidence. With no batch, every batch's.
	Suspect bool
}

// Validate rejects contradicting or empty selections (InputError).
func (s Selection) Validate() error {
	switch {
	case len(s.IDs) > 0 && (s.Batch != "" || s.Class != "" || s.Reason != "" || s.Suspect):
		return inputErrorf("give dead letter IDs or --batch/--suspect (with --class/--reason), not both")
	case len(s.IDs) == 0 && s.Batch == "" && !s.Suspect && (s.Class != "" || s.Reason != ""):
		return inputErrorf("--class and --reason select within a batch: add --batch B (or --suspect)")
	case len(s.IDs) == 0 && s.Batch == "" && !s.Suspect:
		return inputErrorf("give dead letter IDs, --batch B or --suspect")
	}
	return CheckClass(s.Class)
}

// CheckClass checks a class filter against the classifier's closed set ("" is
// no filter).
func CheckClass(class string) error {
	if class == "" {
		return nil
	}
	if _, err := classify.ParseClass(class); err != nil {
		return &InputError{Err: fmt.Errorf("--class: %w", err)}
	}
	return nil
}

// RequeueResult is what one requeue did.
type RequeueResult struct {
	// Requeued is the number of records sent back to the queue.
	Requeued int
	// IDs are the dead letters requeued, in order.
	IDs []int64
	// Skipped: selected dead letters requeued before (or by a concurrent run).
	Skipped int
	// Batches touched, in order.
	Batches []string
	// Unchanged counts rejected records whose request renders as before:
	// they will likely be rejected again.
	Unchanged int
}

// AlertDeadLettersRequeued is the alert kind a requeue raises when an
// Alerter is given.
const AlertDeadLettersRequeued keys.AlertKind = "dead_letters_requeued"

// RequeueOptions tune Requeue.
type RequeueOptions struct {
	// Alerter, if set, raises an alert naming what was requeued (the web
	// page does: an action taken in a browser must leave a trace). Default
	// nil: none.
	Alerter *keys.Alerter
	// By says who requeued, for the alert ("web", "hand"). Default "hand".
	By string
	// NoCache makes the requeued jobs call the provider even when their
	// pipeline's response cache holds an answer (`triage dlq requeue
	// --no-cache`). Default false: an answer already paid for is used.
	NoCache bool
}

// Requeue marks the selected dead letters requeued and inserts one new River
// job per record, in one transaction: a record is requeued once however often
// (or however concurrently) this runs. Each job is built from cfg as it is
// now: the pipeline's current key decides the queue, its max_attempts the
// attempts; the worker renders the request from the current pipeline.
//
// A selected dead letter whose old job is still live (not completed,
// cancelled or discarded), or whose record has a line still in a live
// provider batch or holding an answer its job can still apply (the
// open-line rule, ledger.LineHold), refuses the whole requeue with a
// LiveJobError: two live jobs, or a new job next to a line the provider
// still runs, would bill the record twice. A record holding a paid answer
// whose job is gone (cancelled by hand while its line was live) is
// requeued with it: its new job applies the answer, no call
// (ledger.RecordLine.OnRequeue). Unknown IDs,
// an unknown batch or a pipeline gone from cfg are an InputError. On any
// error nothing is changed.
func Requeue(ctx context.Context, pool *pgxpool.Pool, cfg *config.Config, sel Selection, opts RequeueOptions) (RequeueResult, error) {
	if err := sel.Validate(); err != nil {
		return RequeueResult{}, err
	}
	var res RequeueResult
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		return res, fmt.Errorf("river client: %w", err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		res = RequeueResult{}
		selected, err := selectDeadLetters(ctx, tx, sel)
		if err != nil {
			return err
		}
		// Every pipeline must still exist before anything is marked.
		type target struct {
			pipeline *config.Pipeline
			opts     *river.InsertOpts
		}
		targets := map[string]target{}
		for _, dl := range selected {
			if _, ok := targets[dl.Pipeline]; ok {
				continue
			}
			pl, err := cfg.Pipeline(dl.Pipeline)
			if err != nil {
				return inputErrorf("dead letter %d: %w; nothing requeued", dl.ID, err)
			}
			key, _, err := cfg.KeyFor(pl.Name)
			if err != nil {
				return inputErrorf("dead letter %d: %w; nothing requeued", dl.ID, err)
			}
			targets[pl.Name] = target{pl, &river.InsertOpts{Queue: keys.QueueName(key.Name), MaxAttempts: jobargs.RiverMaxAttempts(pl)}}
		}
		adopt, err := refuseLiveJobs(ctx, rc, tx, selected)
		if err != nil {
			return err
		}

		ids := make([]int64, len(selected))
		for i, dl := range selected {
			ids[i] = dl.ID
		}
		marked, err := ledger.MarkRequeued(ctx, tx, ids)
		if err != nil {
			return err
		}
		res.Skipped = len(selected) - len(marked)
		if len(marked) == 0 {
			return nil
		}

		// The records, per batch, from the ledger.
		byBatch := map[string][]string{}
		var toInsert []ledger.DeadLetter
		for _, dl := range selected {
			if _, ok := slices.BinarySearch(marked, dl.ID); !ok {
				continue
			}
			if _, seen := byBatch[dl.Batch]; !seen {
				res.Batches = append(res.Batches, dl.Batch)
			}
			byBatch[dl.Batch] = append(byBatch[dl.Batch], dl.RecordID)
			toInsert = append(toInsert, dl)
		}
		// A requeued record of a cancelled batch is wanted again: the
		// batch runs again, or its new job would be cancelled at once.
		for _, b := range res.Batches {
			if err := ledger.UncancelBatch(ctx, tx, b); err != nil {
				return err
			}
		}
		records := map[[2]string]json.RawMessage{}
		for _, b := range res.Batches {
			recs, err := ledger.Records(ctx, tx, b, byBatch[b])
			if err != nil {
				return err
			}
			for _, r := range recs {
				records[[2]string{b, r.ID}] = r.Data
			}
		}
		params := make([]river.InsertManyParams, 0, len(toInsert))
		for _, dl := range toInsert {
			data, ok := records[[2]string{dl.Batch, dl.RecordID}]
			if !ok {
				return fmt.Errorf("dead letter %d: record %s/%s is not in the ledger", dl.ID, dl.Batch, dl.RecordID)
			}
			t := targets[dl.Pipeline]
			if dl.Class == classify.Rejected.String() && sameRequest(t.pipeline, cfg, dl, data) {
				res.Unchanged++
			}
			params = append(params, river.InsertManyParams{
				Args:       jobargs.Args{Batch: dl.Batch, Pipeline: dl.Pipeline, RecordID: dl.RecordID, Record: data, NoCache: opts.NoCache},
				InsertOpts: t.opts,
			})
			res.IDs = append(res.IDs, dl.ID)
		}
		inserted, err := rc.InsertManyTx(ctx, tx, params)
		if err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
		res.Requeued = len(inserted)
		return adoptLines(ctx, tx, adopt, inserted)
	})
	if err != nil {
		return RequeueResult{}, err
	}
	if opts.Alerter != nil && res.Requeued > 0 {
		opts.Alerter.Alert(ctx, keys.Alert{
			Kind:    AlertDeadLettersRequeued,
			Batch:   strings.Join(res.Batches, ","),
			Message: fmt.Sprintf("requeued %d dead letter(s): %s", res.Requeued, idList(res.IDs)),
			Fields:  map[string]any{"by": cmpOr(opts.By, "hand"), "dead_letter_ids": idList(res.IDs), "selection": sel.String()},
			ByHand:  opts.By != "safety_net",
		})
	}
	return res, nil
}

// String is the selection as `triage dlq requeue` arguments.
func (s Selection) String() string {
	if len(s.IDs) > 0 {
		return idList(s.IDs)
	}
	var parts []string
	if s.Suspect {
		parts = append(parts, "--suspect")
	}
	if s.Batch != "" {
		parts = append(parts, "--batch "+s.Batch)
	}
	out := strings.Join(parts, " ")
	if s.Class != "" {
		out += " --class " + s.Class
	}
	if s.Reason != "" {
		out += " --reason " + s.Reason
	}
	return out
}

func idList(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, " ")
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// liveJobStates are the River states in which a job can still run.
var liveJobStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateScheduled,
}

// refuseLiveJobs returns a LiveJobError when any dead letter not requeued
// yet still has a live job, or a record line the open-line rule holds
// against a requeue; it returns the lines the new jobs adopt. Dead letters
// requeued before are skipped by MarkRequeued anyway: their old job is not
// this requeue's business.
func refuseLiveJobs(ctx context.Context, rc *river.Client[pgx.Tx], tx pgx.Tx, selected []ledger.DeadLetter) ([]ledger.RecordLine, error) {
	byJob := map[int64]int64{}
	var jobIDs []int64
	for _, dl := range selected {
		if dl.JobID != 0 && dl.RequeuedAt == nil {
			byJob[dl.JobID] = dl.ID
			jobIDs = append(jobIDs, dl.JobID)
		}
	}
	e := &LiveJobError{}
	live, err := liveJobs(ctx, rc, tx, jobIDs)
	if err != nil {
		return nil, fmt.Errorf("look up the dead letters' jobs: %w", err)
	}
	for _, j := range live {
		e.Jobs = append(e.Jobs, LiveJob{DeadLetterID: byJob[j.ID], JobID: j.ID, State: string(j.State)})
	}
	slices.SortFunc(e.Jobs, func(a, b LiveJob) int { return int(a.DeadLetterID - b.DeadLetterID) })
	lines, adopt, err := heldRecords(ctx, rc, tx, selected)
	if err != nil {
		return nil, err
	}
	e.Lines = lines
	if len(e.Jobs) == 0 && len(e.Lines) == 0 {
		return adopt, nil
	}
	return nil, e
}

// liveJobs returns the jobs of ids that can still run.
func liveJobs(ctx context.Context, rc *river.Client[pgx.Tx], tx pgx.Tx, ids []int64) (map[int64]*rivertype.JobRow, error) {
	out := map[int64]*rivertype.JobRow{}
	if len(ids) == 0 {
		return out, nil
	}
	live, err := rc.JobListTx(ctx, tx, river.NewJobListParams().IDs(ids...).States(liveJobStates...).First(len(ids)))
	if err != nil {
		return nil, err
	}
	for _, j := range live.Jobs {
		out[j.ID] = j
	}
	return out, nil
}

// heldRecords finds the open lines of the selected records (not requeued
// yet) and asks the open-line rule what a requeue does with each
// (ledger.RecordLine.OnRequeue): held, a line still in a live provider
// batch or holding a paid answer its job can still apply (a new job for
// such a record would send it again while the provider runs, and bills,
// the first line; the key's submitter records the answer once the provider
// batch ends); adopt, a paid answer whose job is gone, which the record's
// new job applies with no call.
func heldRecords(ctx context.Context, rc *river.Client[pgx.Tx], tx pgx.Tx, selected []ledger.DeadLetter) (held []HeldLine, adopt []ledger.RecordLine, err error) {
	byBatch := map[string][]string{}
	dlOf := map[[2]string]int64{}
	var batches []string
	for _, dl := range selected {
		if dl.RequeuedAt != nil {
			continue
		}
		if _, ok := byBatch[dl.Batch]; !ok {
			batches = append(batches, dl.Batch)
		}
		byBatch[dl.Batch] = append(byBatch[dl.Batch], dl.RecordID)
		dlOf[[2]string{dl.Batch, dl.RecordID}] = dl.ID
	}
	for _, b := range batches {
		lines, err := ledger.HeldRecords(ctx, tx, b, byBatch[b])
		if err != nil {
			return nil, nil, err
		}
		jobIDs := make([]int64, len(lines))
		for i, l := range lines {
			jobIDs[i] = l.JobID
		}
		live, err := liveJobs(ctx, rc, tx, jobIDs)
		if err != nil {
			return nil, nil, fmt.Errorf("look up the jobs of the records' lines: %w", err)
		}
		for _, l := range lines {
			if l.OnRequeue(live[l.JobID] != nil) == ledger.RequeueAdopt {
				adopt = append(adopt, l)
				continue
			}
			held = append(held, HeldLine{DeadLetterID: dlOf[[2]string{l.Batch, l.RecordID}], Batch: l.Batch, RecordID: l.RecordID,
				State: l.State, ProviderBatch: l.ProviderBatch})
		}
	}
	slices.SortFunc(held, func(a, b HeldLine) int { return int(a.DeadLetterID - b.DeadLetterID) })
	return held, adopt, nil
}

// adoptLines gives each adopted line to its record's new job.
func adoptLines(ctx context.Context, tx pgx.Tx, adopt []ledger.RecordLine, inserted []*rivertype.JobInsertResult) error {
	if len(adopt) == 0 {
		return nil
	}
	jobOf := map[[2]string]int64{}
	for _, r := range inserted {
		var a jobargs.Args
		if err := json.Unmarshal(r.Job.EncodedArgs, &a); err != nil {
			return fmt.Errorf("requeued job %d: args: %w", r.Job.ID, err)
		}
		jobOf[[2]string{a.Batch, a.RecordID}] = r.Job.ID
	}
	for _, l := range adopt {
		job, ok := jobOf[[2]string{l.Batch, l.RecordID}]
		if !ok {
			continue // its dead letter was requeued by a concurrent run
		}
		if _, err := ledger.AdoptBatchLine(ctx, tx, l.ID, job); err != nil {
			return err
		}
	}
	return nil
}

// selectDeadLetters reads the dead letters sel names, in id order. Unknown
// IDs and an unknown batch are an InputError; IDs requeued before are
// included (MarkRequeued skips them).
func selectDeadLetters(ctx context.Context, tx pgx.Tx, sel Selection) ([]ledger.DeadLetter, error) {
	if len(sel.IDs) > 0 {
		var out []ledger.DeadLetter
		var missing []string
		for _, id := range sel.IDs {
			dl, err := ledger.GetDeadLetter(ctx, tx, id)
			if errors.Is(err, ledger.ErrNotFound) {
				missing = append(missing, strconv.FormatInt(id, 10))
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, dl)
		}
		if len(missing) > 0 {
			return nil, inputErrorf("no dead letter with id %s (see `triage dlq list`); nothing requeued", strings.Join(missing, ", "))
		}
		slices.SortFunc(out, func(a, b ledger.DeadLetter) int { return int(a.ID - b.ID) })
		return out, nil
	}
	if sel.Batch != "" {
		if err := CheckBatch(ctx, tx, sel.Batch); err != nil {
			return nil, err
		}
	}
	return ledger.ListDeadLetters(ctx, tx, ledger.DeadLetterFilter{Batch: sel.Batch, Class: sel.Class, Reason: sel.Reason, Suspect: sel.Suspect})
}

// CheckBatch returns an InputError when batch does not exist.
func CheckBatch(ctx context.Context, db ledger.DBTX, batch string) error {
	if _, err := ledger.GetBatch(ctx, db, batch); errors.Is(err, ledger.ErrNotFound) {
		return inputErrorf("no batch %q (see `triage status`)", batch)
	} else if err != nil {
		return err
	}
	return nil
}

// sameRequest reports whether the current pipeline renders, for this record,
// the model, system prompt and prompt the rejected request carried. Only a
// hint for a warning: any doubt is "changed".
func sameRequest(pl *config.Pipeline, cfg *config.Config, dl ledger.DeadLetter, data json.RawMessage) bool {
	var old struct {
		Model  string `json:"model"`
		System string `json:"system"`
		Prompt string `json:"prompt"`
	}
	if len(dl.Request) == 0 || json.Unmarshal(dl.Request, &old) != nil || old.Model == "" {
		return false
	}
	var rec map[string]any
	if json.Unmarshal(data, &rec) != nil {
		return false
	}
	prompt, err := pl.Render(rec)
	if err != nil {
		return false
	}
	m, err := cfg.Model(pl.Model)
	if err != nil {
		return false
	}
	return old.Model == m.Name && old.System == pl.System && old.Prompt == prompt
}
