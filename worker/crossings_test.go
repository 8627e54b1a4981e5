package worker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

// An accepted partial (a cut stream kept as the record's result) is not a
// whole answer: it is never stored in the response cache. A later batch
// with the same request calls the provider and gets the whole answer,
// never the truncated text as an unmarked cache_hit.
func TestAcceptedPartialIsNotCached(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true, RecordScripts: map[string][]fakeprovider.Step{
		"r001": {{Action: fakeprovider.ActionCutStream, Chunks: 3}},
	}}, tweaks{output: "text", extraPipeline: "stream = true\naccept_partial_min_chars = 30\nambiguous_retries = 0\ncache = true\n"})
	recs := records(2, nil)
	b.start(t)

	b.enqueue(t, "first", recs)
	st := b.waitSettled(t, "first", 20*time.Second)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, 2, b.fake.Stats().Requests)
	rows := map[string]ledger.ResultRow{}
	for row, err := range ledger.Results(context.Background(), b.db.Pool, "first") {
		require.NoError(t, err)
		rows[row.ID] = row
	}
	require.True(t, rows["r001"].Partial, "the cut stream was accepted as partial")
	require.Equal(t, 1, b.cacheRows(t), "only the whole answer is cached")

	b.enqueue(t, "second", recs)
	st = b.waitSettled(t, "second", 20*time.Second)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, 3, b.fake.Stats().Requests, "the partial's request is sent again; the whole answer comes from the cache")
	rows = map[string]ledger.ResultRow{}
	for row, err := range ledger.Results(context.Background(), b.db.Pool, "second") {
		require.NoError(t, err)
		rows[row.ID] = row
	}
	require.False(t, rows["r001"].Partial)
	var text string
	require.NoError(t, json.Unmarshal(rows["r001"].Output, &text))
	require.Equal(t, answerOf(t, b, recs[0]), text, "the whole answer, not the truncated text")
	for _, a := range attemptsOf(t, b, "second") {
		if a.RecordID == "r001" {
			require.False(t, a.Reason != nil && *a.Reason == ledger.ReasonCacheHit, "no cache hit from a partial")
		}
	}
}
