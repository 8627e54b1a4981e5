package submitter

import (
	"context"
	"errors"
	"fmt"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/batchapi"
)

// ReasonStrayDuplicate is the ledger reason of a paid duplicate: a line a
// stray provider batch ran (ledger.ReasonStrayDuplicate).
const ReasonStrayDuplicate = ledger.ReasonStrayDuplicate

// collectStray collects an ended stray provider batch (strayBatch): each
// line it ran is recorded as a paid duplicate of its record, priced as the
// record's job would have priced its answer, and never stored as an answer
// of the record's line (the line is the original row's, and its answer
// comes from that row's batch); a line the cancel stopped (or that
// expired) ran nothing and is not recorded. When some result lines could
// not be read, each line without a result may be one of them: its
// duplicate is possibly billed. A failed batch (OpenAI validation) ran
// nothing. The whole collection is one transaction
// (ledger.CollectStrayBatch), so a collection cut midway is done again
// whole, never twice.
func (s *Submitter) collectStray(ctx context.Context, r *row, b batchapi.Batch) error {
	atts, err := ledger.StrayAttempts(ctx, s.cfg.Pool, r.ID)
	if err != nil {
		return fmt.Errorf("submitter: %w", err)
	}
	byCustom := make(map[string]ledger.StrayAttempt, len(atts))
	for _, a := range atts {
		byCustom[a.CustomID] = a
	}
	var (
		dups       []ledger.PaidDuplicate
		seen       = map[string]bool{}
		unreadable int
		billedUSD  float64
	)
	if !b.Failed {
		for res, err := range s.cfg.Client.Results(ctx, b) {
			if errors.Is(err, batchapi.ErrMalformedResult) {
				unreadable++
				s.log.WarnContext(ctx, "unreadable result line of a stray provider batch", "key", s.key, "provider_batch", r.ID, "err", err)
				continue
			}
			if err != nil {
				return s.later(ctx, r, err)
			}
			seen[res.CustomID] = true
			a, ok := byCustom[res.CustomID]
			if !ok || !res.Ran {
				continue
			}
			out := s.answerOutcome(ledger.BatchLineAnswer{Observation: res.Res.Observation}, a.Model, ReasonStrayDuplicate)
			billedUSD += out.CostUSD
			dups = append(dups, ledger.PaidDuplicate{Of: a.ID, Outcome: out})
		}
	}
	if unreadable > 0 {
		for _, a := range atts {
			if !seen[a.CustomID] {
				out := s.answerOutcome(ledger.BatchLineAnswer{Observation: s.lostObservation()}, a.Model, ReasonStrayDuplicate)
				dups = append(dups, ledger.PaidDuplicate{Of: a.ID, Outcome: out})
			}
		}
	}
	if err := ledger.CollectStrayBatch(ctx, s.cfg.Pool, *r, dups, s.now()); err != nil {
		return fmt.Errorf("submitter: %w", err)
	}
	s.log.WarnContext(ctx, "stray provider batch collected: its lines that ran are paid duplicates", "key", s.key,
		"provider_batch", r.ID, "stray_of", *r.StrayOf, "id", b.ID, "status", b.VendorStatus, "lines", len(atts),
		"duplicates", len(dups), "duplicates_usd", billedUSD, "unreadable", unreadable)
	return nil
}
