package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
)

// BatchView is one batch with what a person needs beside the `triage status
// --json` shape: its budget and its key's breaker, to say why it is paused.
type BatchView struct {
	Status ledger.Status
	Batch  ledger.Batch
	// Key is the batch's key's breaker and pause; nil when unknown.
	Key *keys.KeyStatus
	// Activity is what is happening to it now (BatchActivity); nil when
	// not read.
	Activity *Activity
	// LostAnswers are the batch's lost answers by resolution; nil when
	// none was lost.
	LostAnswers *ledger.LostAnswers
}

// Why says why a batch is paused or not progressing, "" when it is
// neither: the Activity's reason when it was read, else PausedWhy.
func (v BatchView) Why() string {
	if v.Activity != nil {
		return v.Activity.Why
	}
	return PausedWhy(v.Status, v.Batch, v.Key)
}

// Now is the `triage status B --json` shape of the view.
func (v BatchView) Now() BatchNow {
	return BatchNow{Status: v.Status, Activity: v.Activity, LostAnswers: v.LostAnswers}
}

// GetBatch reads one batch's view, its lost answers included. An unknown
// batch is an InputError.
func GetBatch(ctx context.Context, pool *pgxpool.Pool, id string) (BatchView, error) {
	st, err := ledger.BatchStatus(ctx, pool, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return BatchView{}, inputErrorf("no batch %q (see `triage status`)", id)
	}
	if err != nil {
		return BatchView{}, err
	}
	v, err := viewOf(ctx, pool, keys.DefaultStore(pool), st)
	if err != nil {
		return BatchView{}, err
	}
	lost, err := ledger.BatchLostAnswers(ctx, pool, id)
	if err != nil {
		return BatchView{}, err
	}
	if lost.Total() > 0 {
		v.LostAnswers = &lost
	}
	return v, nil
}

// ListBatches reads every batch's view, oldest first.
func ListBatches(ctx context.Context, pool *pgxpool.Pool) ([]BatchView, error) {
	list, err := ledger.ListBatches(ctx, pool)
	if err != nil {
		return nil, err
	}
	store := keys.DefaultStore(pool)
	out := make([]BatchView, 0, len(list))
	for _, st := range list {
		v, err := viewOf(ctx, pool, store, st)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Statuses is the `triage status --json` shape of views: [] when empty.
func Statuses(views []BatchView) []ledger.Status {
	out := make([]ledger.Status, len(views))
	for i, v := range views {
		out[i] = v.Status
	}
	return out
}

func viewOf(ctx context.Context, pool *pgxpool.Pool, store *keys.Store, st ledger.Status) (BatchView, error) {
	b, err := ledger.GetBatch(ctx, pool, st.Batch)
	if err != nil {
		return BatchView{}, err
	}
	ks, err := store.KeyStatus(ctx, st.Key)
	if err != nil {
		return BatchView{}, err
	}
	return BatchView{Status: st, Batch: b, Key: ks}, nil
}

// PausedWhy says why a batch is paused or waiting, "" when it is neither:
// its key exhausted (since when, the next probe, what goes on on a
// fallback), its budget reached (what was spent of what, and how to raise
// it), or, for a running batch, its key's storm breaker open.
func PausedWhy(st ledger.Status, b ledger.Batch, ks *keys.KeyStatus) string {
	switch st.State {
	case ledger.BatchPausedExhausted:
		s := "key " + b.Key + " exhausted"
		if ks != nil {
			s = DescribeKey(ks)
		}
		return s + OnFallback(st)
	case ledger.BatchPausedBudget:
		s := "budget reached"
		if b.BudgetUSD != nil {
			s += fmt.Sprintf(": spent $%.4f of $%.4f", b.SpentUSD, *b.BudgetUSD)
		}
		return s + "; raise it with `triage batch budget " + st.Batch + " USD`"
	case ledger.BatchRunning:
		if ks != nil {
			if why := DescribeStorm(ks); why != "" {
				return "waiting: " + why
			}
		}
	}
	return ""
}

// OnFallback is what a paused batch still does on its fallback models:
// "; 12 records moved to a fallback model", "" when none moved. A batch
// whose key is exhausted but whose records go on elsewhere is paused on
// that key only, and must not read as stopped.
func OnFallback(st ledger.Status) string {
	if st.Fallback == 0 {
		return ""
	}
	if st.Fallback == 1 {
		return "; 1 record moved to a fallback model"
	}
	return fmt.Sprintf("; %d records moved to a fallback model", st.Fallback)
}
