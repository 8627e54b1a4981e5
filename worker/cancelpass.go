package worker

import (
	"context"
	"net/http"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/provider"
)

// leftResponsesPerPass bounds the background responses one pass ends: two
// calls each (a fetch, a cancel) in the spend loop, the rest next time.
const leftResponsesPerPass = 50

// leftStep is what the pass does next with a left background response,
// from the provider's answer to a fetch or a cancel (leftStepOf).
type leftStep int

const (
	// leftLater: no useful answer (network, 429, 5xx, a cancel still
	// under way): ask again at the next pass.
	leftLater leftStep = iota
	// leftStuck: an answer that will not change by asking again (404:
	// the provider has no such response, 401: the key was revoked…):
	// left unknown in the ledger, said once in the log.
	leftStuck
	// leftCancel: still queued or in progress: cancel it.
	leftCancel
	// leftCancelled: it ended cancelled: settle it so.
	leftCancelled
	// leftEnded: it ended (completed, failed, incomplete) and was billed:
	// settle it with its usage.
	leftEnded
)

// leftStepOf decides leftStep from a fetch's or a cancel's result.
func leftStepOf(res provider.Result) leftStep {
	o := res.Observation
	switch {
	case o.Phase != classify.PhaseResponse || o.Status == http.StatusTooManyRequests || o.Status >= 500:
		return leftLater
	case o.Status/100 != 2 || res.ResponseStatus == "":
		return leftStuck
	case res.Pending():
		return leftLater
	case res.ResponseStatus == "cancelled":
		return leftCancelled
	default:
		return leftEnded
	}
}

// cancelLeftResponses is the spend loop's pass over the background
// responses left running at the provider for records no longer wanted
// (ledger.LeftResponses: a batch cancelled by hand while their jobs were
// queued, so no run of theirs polls or cancels them). Each is fetched; one
// still running is cancelled at the provider; the ledger then records how
// it ended (ledger.SettleLeftResponse): cancelled, or ended before the
// cancel and billed, its usage priced once. Only this process's keys are
// asked (another process works the others). Several processes may run it
// at once: a cancel is idempotent at the provider and the ledger settles
// each attempt once.
func (r *Runtime) cancelLeftResponses(ctx context.Context) {
	responses := false
	for _, k := range r.keys {
		responses = responses || k.cfg.Responses()
	}
	if !responses {
		return // no key here can have left one
	}
	left, err := ledger.LeftResponses(ctx, r.pool, leftResponsesPerPass)
	if err != nil {
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "left background responses", "err", err)
		}
		return
	}
	for _, l := range left {
		if ctx.Err() != nil {
			return
		}
		if k := r.keys[l.Key]; k != nil && k.cfg.Responses() {
			r.endLeftResponse(ctx, k, l)
		}
	}
}

// endLeftResponse fetches a left response, cancels it while it runs, and
// settles its attempts from how it ended.
func (r *Runtime) endLeftResponse(ctx context.Context, k *keyRuntime, l ledger.LeftResponse) {
	log := r.log.With("key", l.Key, "batch", l.Batch, "record_id", l.RecordID, "response_id", l.ResponseID)
	res, err := k.client.Poll(ctx, l.ResponseID)
	step := leftStepOf(res)
	if err == nil && step == leftLater && res.Pending() {
		res, err = k.client.Cancel(ctx, l.ResponseID)
		step = leftStepOf(res)
	}
	if err != nil {
		log.WarnContext(ctx, "end a background response left running", "err", err)
		return
	}
	out := ledger.LeftOutcome{InputTokens: res.InputTokens, OutputTokens: res.OutputTokens}
	switch step {
	case leftLater:
		return
	case leftStuck:
		if _, seen := r.leftStuck.LoadOrStore(l.Key+"\x00"+l.ResponseID, true); !seen {
			log.WarnContext(ctx, "background response left running: the provider's answer leaves it unknown, possibly billed",
				"http_status", res.Observation.Status)
		}
		return
	case leftCancelled:
		out.Reason = ledger.ReasonResponseCancelled
	case leftEnded:
		out.Reason = ledger.ReasonResponseEndedUnwanted
	}
	if m, err := r.cfg.Model(l.Model); err == nil {
		out.CostUSD = cost(m, out.InputTokens, out.OutputTokens)
	}
	n, err := ledger.SettleLeftResponse(context.WithoutCancel(ctx), r.pool, l.Key, l.ResponseID, out)
	if err != nil {
		log.WarnContext(ctx, "settle a background response left running", "err", err)
		return
	}
	if n > 0 {
		log.InfoContext(ctx, "background response left running for a cancelled record: ended at the provider",
			"status", res.ResponseStatus, "reason", out.Reason, "cost_usd", out.CostUSD, "attempts", n)
	}
}
