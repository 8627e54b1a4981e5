package operator

import (
	"context"
	"strconv"
	"strings"

	"github.com/triage-dev/triage/ledger"
)

// CancelProviderBatches asks for the provider batches in flight holding
// lines of batch to be cancelled (`triage batch cancel B`) and returns what
// it asked for, oldest first; none when the batch has no provider batch in
// flight. It only records the request: the key's batch submitter sends the
// cancel to the provider and requeues the lines the provider never ran once
// the provider confirms. An unknown batch is an InputError.
func CancelProviderBatches(ctx context.Context, db ledger.DBTX, batch string) ([]ledger.CancelRequest, error) {
	if err := CheckBatch(ctx, db, batch); err != nil {
		return nil, err
	}
	return ledger.RequestProviderCancel(ctx, db, batch)
}

// CancelNames names the provider batches of a cancel request for a person:
// "batch_abc, msgbatch_xyz", with "#12 (not at the provider yet)" for one
// not submitted and "(asked before)" after one already asked to cancel.
func CancelNames(reqs []ledger.CancelRequest) string {
	names := make([]string, len(reqs))
	for i, r := range reqs {
		n := "#" + strconv.FormatInt(r.ID, 10) + " (not at the provider yet)"
		if r.ProviderBatchID != nil {
			n = *r.ProviderBatchID
		}
		if r.Already {
			n += " (asked before)"
		}
		names[i] = n
	}
	return strings.Join(names, ", ")
}
