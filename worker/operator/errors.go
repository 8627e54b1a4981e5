package operator

import (
	"fmt"
	"strconv"
	"strings"
)

// InputError is a request the caller got wrong: an unknown dead letter,
// batch or key, contradicting selectors. The CLI exits 2 on it, a page
// answers 400. Nothing was changed.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErrorf(format string, args ...any) error {
	return &InputError{Err: fmt.Errorf(format, args...)}
}

// LiveJob is one selected dead letter whose River job has not finished.
type LiveJob struct {
	DeadLetterID int64
	JobID        int64
	State        string
}

// LiveJobError refuses a requeue: some selected dead letters still have a
// live River job (the dead letter was written, then the job's cancel was
// lost, e.g. the worker died). A requeue would make a second job for the
// same record while the first can still run and call the provider. The old
// job cancels itself when it next runs (it finds the dead letter), after
// which the requeue goes through. Nothing was changed.
//
// Lines are the selected records whose provider-batch line is still in a
// live provider batch or holds an answer not recorded yet (a job cancelled
// by hand while its line was sent): the provider runs and bills that line
// whatever happens to the job, so a new job would pay for the record twice.
// The key's submitter records the answer once the provider batch ends
// (`triage status` shows it), after which the requeue goes through.
type LiveJobError struct {
	Jobs  []LiveJob
	Lines []HeldLine
}

// HeldLine is one selected dead letter whose record's line holds it.
type HeldLine struct {
	DeadLetterID    int64
	Batch, RecordID string
	State           string // submitted or answered
	ProviderBatch   string // the provider's batch id ("" before its create answered)
}

func (e *LiveJobError) Error() string {
	var msgs []string
	if len(e.Jobs) > 0 {
		parts := make([]string, len(e.Jobs))
		for i, j := range e.Jobs {
			parts[i] = "dead letter " + strconv.FormatInt(j.DeadLetterID, 10) + " (job " +
				strconv.FormatInt(j.JobID, 10) + ", " + j.State + ")"
		}
		msgs = append(msgs, "the job of "+strings.Join(parts, ", ")+" is still live: requeueing now would run the record twice. "+
			"Wait until the job finishes (it cancels itself when it sees its dead letter) "+
			"or cancel it in River UI, then requeue again")
	}
	if len(e.Lines) > 0 {
		parts := make([]string, len(e.Lines))
		for i, l := range e.Lines {
			where := "provider batch " + l.ProviderBatch
			if l.ProviderBatch == "" {
				where = "a provider batch being created"
			}
			if l.State == "answered" {
				where = "the answer of " + where + ", not recorded yet"
			}
			parts[i] = "dead letter " + strconv.FormatInt(l.DeadLetterID, 10) + " (record " + l.Batch + "/" + l.RecordID + ": " + where + ")"
		}
		msgs = append(msgs, "the line of "+strings.Join(parts, ", ")+" is still with the provider, which bills it whatever happens to the job: "+
			"requeueing now would pay for the record twice. Wait until the provider batch ends and its answers are collected "+
			"(`triage status` shows its provider batches), then requeue again")
	}
	return strings.Join(msgs, "; ") + "; nothing requeued"
}
