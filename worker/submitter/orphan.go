package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/provider"
	"github.com/triage-dev/triage/worker/rivertable"
)

// ReasonJobGone is the ledger reason of a batch attempt whose line the
// provider answered after its job was cancelled or deleted by hand
// (ledger.ReasonJobGone).
const ReasonJobGone = ledger.ReasonJobGone

// settleAnsweredOrphans finishes the attempts of answered lines whose job
// was cancelled or deleted by hand while the line was in a live provider
// batch: the provider billed it, so the attempt gets the answer's real cost
// (at batch prices) instead of staying an intent counted as possibly billed
// for ever. The line stays answered, its answer held (the open-line rule,
// ledger.LineHold): a requeue of the record gives it to the new job, which
// applies it with no call (ledger.AdoptBatchLine); retention closes it if
// nobody does.
func (s *Submitter) settleAnsweredOrphans(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		found, err := ledger.LockOrphanLines(ctx, tx, s.key, rivertable.Job(s.cfg.RiverSchema), chunk)
		if err != nil || len(found) == 0 {
			return err
		}
		for _, o := range found {
			var ans ledger.BatchLineAnswer
			if err := json.Unmarshal(o.Answer, &ans); err != nil {
				return fmt.Errorf("answer of line %d: %w", o.ID, err)
			}
			out := s.answerOutcome(ans, o.Model, ReasonJobGone)
			if err := ledger.FinishAttempt(ctx, tx, o.AttemptID, out); err != nil && !errors.Is(err, ledger.ErrAttemptFinished) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("submitter: settle answered lines of cancelled jobs: %w", err)
	}
	return nil
}

// answerOutcome is the ledger outcome of an answer nobody applies (a line
// whose job is gone, a line a stray provider batch ran), with reason: its
// class and usage priced as the job would have priced them.
func (s *Submitter) answerOutcome(ans ledger.BatchLineAnswer, model, reason string) ledger.Outcome {
	if ans.RejectReason != "" {
		return ledger.Outcome{Status: ledger.AttemptFailed, Class: classify.Rejected, VendorCode: ans.RejectCode, Reason: reason}
	}
	o := ans.Observation
	if o.Phase != "" && o.Phase != classify.PhaseResponse {
		// Its result could not be read (lostAnswer): maybe billed, cost unknown.
		return ledger.Outcome{Status: ledger.AttemptPossiblyBilled, Class: classify.Ambiguous, Reason: reason}
	}
	res := provider.DecodeResponse(s.cfg.Client.Format(), s.cfg.Key.Vendor, s.cfg.Key.Path, o.Status, o.Headers, []byte(o.Body))
	v := s.cfg.Config.Classifier().Classify(res.Observation)
	out := ledger.Outcome{Status: ledger.AttemptFailed, Class: v.Class, HTTPStatus: o.Status, VendorCode: deref(v.Code),
		Reason: reason, InputTokens: res.InputTokens, OutputTokens: res.OutputTokens}
	if v.Class == classify.OK {
		out.Status = ledger.AttemptOK
	}
	if m, err := s.cfg.Config.Model(model); err == nil {
		out.CostUSD = m.BatchCost(res.InputTokens, res.OutputTokens)
		sync := m.Cost(res.InputTokens, res.OutputTokens)
		out.SyncCostUSD = &sync
	}
	return out
}
