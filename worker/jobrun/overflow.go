package jobrun

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/tidwall/gjson"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/facts"
)

// metaChange is the job metadata key that holds the job's one change, so
// that every later run renders the same changed request (and its own
// idempotency key) until the job ends.
const metaChange = "triage_change"

// changeLabel is how the ledger, export and dlq show name the change.
func changeLabel(ch decide.Change) string {
	switch {
	case ch.MaxFieldChars > 0 && ch.DropJSON:
		return ledger.ChangeTruncated + "+" + ledger.ChangeDroppedJSON
	case ch.MaxFieldChars > 0:
		return ledger.ChangeTruncated
	case ch.DropJSON:
		return ledger.ChangeDroppedJSON
	}
	return ""
}

// jobChange reads the job's change from its metadata.
func jobChange(metadata []byte) decide.Change {
	var ch decide.Change
	if raw := gjson.GetBytes(metadata, metaChange); raw.IsObject() {
		_ = json.Unmarshal([]byte(raw.Raw), &ch)
	}
	return ch
}

// overflowFacts fills a rejected call's changeFacts from the pipeline, the
// rendered request and the vendor's counts.
func (c *call) overflowFacts(ov classify.Observation) decide.ChangeFacts {
	f := decide.ChangeFacts{Changed: !c.change.IsZero(), Truncate: c.pipeline.OnOverflow == config.OverflowTruncate, JSON: c.req.JSON}
	if f.Truncate && !f.Changed && c.verdict.Reason == decide.ReasonContextLength {
		var record any
		if err := json.Unmarshal(c.job.Args.Record, &record); err == nil {
			counts, _ := classify.ContextOverflow(ov)
			f.Cut = decide.FitCut(record, len(c.req.System)+len(c.req.Prompt), counts, c.model.ContextTokens, c.req.MaxTokens)
		}
	}
	return f
}

// retryChanged carries out a RetryChanged: the rejected attempt's outcome,
// then the change kept in the job's metadata (it lands with the snooze), and
// the job back at once. The next run renders the changed request, whose hash
// and so idempotency key differ from the rejected one's.
func (r *Runner) retryChanged(ctx context.Context, c *call, rx decide.Reaction) error {
	if err := r.finish(ctx, c, facts.AttemptStatus(rx.Outcome)); err != nil {
		return fmt.Errorf("retry changed: %w", err)
	}
	if err := river.MetadataSet(ctx, metaChange, rx.Change); err != nil {
		return fmt.Errorf("retry changed: keep the change: %w", err)
	}
	r.log.InfoContext(ctx, "rejected: retrying once changed", "batch", c.job.Args.Batch, "record_id", c.job.Args.RecordID,
		"job_id", c.job.ID, "reason", c.verdict.Reason, "change", changeLabel(rx.Change), "max_field_chars", rx.Change.MaxFieldChars)
	return park(ctx, c.job, 0)
}
