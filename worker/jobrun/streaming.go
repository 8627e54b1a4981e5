package jobrun

import (
	"context"
	"encoding/json"
	"unicode/utf8"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
)

// keepPartial, after a stream cut midway (PhaseStream), fills in the
// partial output the ledger keeps and returns its length in characters; 0
// for any other outcome. A cut stream tells little usage: OpenAI sends it
// in the last chunk only, Anthropic its input and a first output count at
// the start. What is missing is estimated (about four bytes a token, as the
// provider counts what it generated), so the attempt's cost is what was
// received and the rest of its estimate stays possibly billed.
func (c *call) keepPartial() int {
	if c.res.Observation.Phase != classify.PhaseStream {
		return 0
	}
	text := c.res.Content
	in := (len(c.req.System) + len(c.req.Prompt)) / 4
	c.res.InputTokens = max(c.res.InputTokens, in)
	if text != "" {
		c.res.OutputTokens = max(c.res.OutputTokens, (len(text)+3)/4)
	}
	received := cost(c.model, c.res.InputTokens, c.res.OutputTokens)
	kept := text
	if c.key != nil && c.key.apiKey != "" {
		// Shown by dlq show and ledger: it passes the key's boundary, as
		// the rest of the provider's text does.
		kept = c.key.redact.Exact(kept)
	}
	c.partial = &ledger.Partial{Text: kept, RestEstimateUSD: estimateCost(c.model, c.req) - received}
	return utf8.RuneCountInString(text)
}

// completePartial stores a cut stream's partial text as the record's result
// and completes the job, like a complete answer (one transaction), with the
// attempt left possibly billed.
func (r *Runner) completePartial(ctx context.Context, c *call) error {
	c.partialAccepted = true
	c.output, _ = json.Marshal(c.res.Content)
	return r.complete(ctx, c)
}

// completedStatus is the ledger status of an attempt whose answer is stored.
func (c *call) completedStatus() ledger.AttemptStatus {
	if c.partialAccepted {
		return ledger.AttemptPossiblyBilled
	}
	return ledger.AttemptOK
}
