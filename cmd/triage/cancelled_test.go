package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

// A job cancelled by hand and one deleted by hand, as River's CLI or UI
// would: `triage work --exit-when-idle` dead-letters their records before it
// leaves, and `triage status --json` shows the batch settled with them
// counted as cancelled.
func TestStatusCountsJobsCancelledOrDeletedByHand(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	in := c.file("in.jsonl", jsonl(4))
	r := c.run("", "enqueue", "--pipeline", "enrich", "--batch", "b1", in)
	require.Equal(t, exitOK, r.code, r.stderr)

	ctx := context.Background()
	rc, err := river.NewClient(riverpgxv5.New(c.db.Pool), &river.Config{Schema: c.db.Schema})
	require.NoError(t, err)
	jobOf := func(record string) int64 {
		var id int64
		require.NoError(t, c.db.Pool.QueryRow(ctx, `SELECT id FROM river_job WHERE args->>'record_id' = $1`, record).Scan(&id))
		return id
	}
	_, err = rc.JobCancel(ctx, jobOf("r002"))
	require.NoError(t, err)
	_, err = rc.JobDelete(ctx, jobOf("r004"))
	require.NoError(t, err)

	r = c.run("", "work", "--exit-when-idle")
	require.Equal(t, exitOK, r.code, r.stderr)

	r = c.run("", "status", "b1", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, string(ledger.BatchSettled), st["state"], r.stdout)
	require.EqualValues(t, 2, st["completed"])
	require.EqualValues(t, 2, st["dead_lettered"])
	require.EqualValues(t, 2, st["cancelled"])
	require.EqualValues(t, 0, st["pending"])

	r = c.run("", "status", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `cancelled by hand:\s+2`, r.stdout)
	r = c.run("", "dlq", "list", "--batch", "b1", "--reason", ledger.ReasonJobMissing, "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"record_id": "r004"`)
}
