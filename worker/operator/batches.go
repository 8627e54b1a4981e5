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
}

// Why says why a paused batch is paused, "" when it is not.
func (v BatchView) Why() string { return PausedWhy(v.Status, v.Batch, v.Key) }

// GetBatch reads one batch's view. An unknown batch is an InputError.
func GetBatch(ctx context.Context, pool *pgxpool.Pool, id string) (BatchView, error) {
	st, err := ledger.BatchStatus(ctx, pool, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return BatchView{}, inputErrorf("no batch %q (see `triage status`)", id)
	}
	if err != nil {
		return BatchView{}, err
	}
	return viewOf(ctx, pool, keys.NewStore(pool, keys.StoreConfig{}), st)
}

// ListBatches reads every batch's view, oldest first.
func ListBatches(ctx context.Context, pool *pgxpool.Pool) ([]BatchView, error) {
	list, err := ledger.ListBatches(ctx, pool)
	if err != nil {
		return nil, err
	}
	store := keys.NewStore(pool, keys.StoreConfig{})
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

// PausedWhy says why a paused batch is paused, "" when it is not: its key
// exhausted (since when, the next probe), or its budget reached (what was
// spent of what, and how to raise it).
func PausedWhy(st ledger.Status, b ledger.Batch, ks *keys.KeyStatus) string {
	switch st.State {
	case ledger.BatchPausedExhausted:
		if ks == nil {
			return "key " + b.Key + " exhausted"
		}
		return DescribeKey(ks)
	case ledger.BatchPausedBudget:
		s := "budget reached"
		if b.BudgetUSD != nil {
			s += fmt.Sprintf(": spent $%.4f of $%.4f", b.SpentUSD, *b.BudgetUSD)
		}
		return s + "; raise it with `triage batch budget " + st.Batch + " USD`"
	}
	return ""
}
