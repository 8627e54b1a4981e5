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
type LiveJobError struct{ Jobs []LiveJob }

func (e *LiveJobError) Error() string {
	parts := make([]string, len(e.Jobs))
	for i, j := range e.Jobs {
		parts[i] = "dead letter " + strconv.FormatInt(j.DeadLetterID, 10) + " (job " +
			strconv.FormatInt(j.JobID, 10) + ", " + j.State + ")"
	}
	return "the job of " + strings.Join(parts, ", ") + " is still live: requeueing now would run the record twice; " +
		"nothing requeued. Wait until the job finishes (it cancels itself when it sees its dead letter) " +
		"or cancel it in River UI, then requeue again"
}
