package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

func TestBatchBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	dlqSeedBatch(t, c, "b1", 2)
	require.NoError(t, ledger.SetBatchState(ctx, c.db.Pool, "b1", ledger.BatchPausedBudget))

	r := c.run("", "batch", "budget", "b1", "12.50")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "batch b1: spend cap $12.50")
	require.Contains(t, r.stdout, "running again")
	b, err := ledger.GetBatch(ctx, c.db.Pool, "b1")
	require.NoError(t, err)
	require.NotNil(t, b.BudgetUSD)
	require.InDelta(t, 12.5, *b.BudgetUSD, 1e-9)
	require.Equal(t, ledger.BatchRunning, b.State)

	r = c.run("", "batch", "budget", "b1", "$20")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NotContains(t, r.stdout, "running again", "it was running already")
	b, err = ledger.GetBatch(ctx, c.db.Pool, "b1")
	require.NoError(t, err)
	require.InDelta(t, 20, *b.BudgetUSD, 1e-9)

	r = c.run("", "batch", "budget", "b1", "0")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "no spend cap")
	b, err = ledger.GetBatch(ctx, c.db.Pool, "b1")
	require.NoError(t, err)
	require.Nil(t, b.BudgetUSD, "0 removes the cap, as budget_usd = 0 does")

	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"negative", "", []string{"budget", "b1", "-5"}},
		{"negative after --", "non-negative", []string{"budget", "b1", "--", "-5"}},
		{"not a number", "non-negative", []string{"budget", "b1", "ten"}},
		{"NaN", "non-negative", []string{"budget", "b1", "NaN"}},
		{"infinite", "non-negative", []string{"budget", "b1", "Inf"}},
		{"unknown batch", `no batch "nope"`, []string{"budget", "nope", "5"}},
		{"no amount", "want a batch and an amount", []string{"budget", "b1"}},
		{"too many", "want a batch and an amount", []string{"budget", "b1", "5", "6"}},
		{"unknown flag", "", []string{"budget", "b1", "5", "--force"}},
		{"unknown subcommand", `unknown subcommand "stop"`, []string{"stop", "b1"}},
		{"no subcommand", "usage", nil},
	} {
		r := c.run("", append([]string{"batch"}, tc.args...)...)
		require.Equal(t, exitUsage, r.code, tc.name)
		require.Empty(t, r.stdout, tc.name)
		require.Contains(t, r.stderr, tc.want, tc.name)
	}
	b, err = ledger.GetBatch(ctx, c.db.Pool, "b1")
	require.NoError(t, err)
	require.Nil(t, b.BudgetUSD, "no refused command changed the batch")
}
