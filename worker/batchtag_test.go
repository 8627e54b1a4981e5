package worker_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/batchapi"
	"github.com/triage-dev/triage/worker/provider"
	"github.com/triage-dev/triage/worker/workertest"
)

// foreignBatch stands for another installation on the same provider
// account (a staging database, a database rebuilt) that creates a batch of
// its own, tagged as its first row would have been under the old scheme:
// "1".
type foreignBatch struct{ id string }

func (l *foreignBatch) create(r *http.Request) error {
	c, err := batchapi.New(batchapi.Options{Vendor: "openai", BaseURL: strings.TrimSuffix(r.URL.String(), "/batches"),
		APIKey: workertest.APIKey, HTTPClient: &http.Client{Transport: http.DefaultTransport}})
	if err != nil {
		return err
	}
	var lines []batchapi.Line
	for i := range 3 {
		body, err := provider.RequestBody(provider.FormatOpenAI, provider.Request{Model: "fake-model", Prompt: "another installation's record",
			MaxTokens: 16, IdempotencyKey: fmt.Sprintf("triage-foreign-%02d", i), RecordID: fmt.Sprintf("foreign-%02d", i)})
		if err != nil {
			return err
		}
		lines = append(lines, batchapi.Line{CustomID: fmt.Sprintf("triage-foreign-%02d", i), Body: body})
	}
	ctx := context.Background()
	file, err := c.Upload(ctx, lines, "1")
	if err != nil {
		return err
	}
	b, err := c.Create(ctx, file, lines, "1")
	l.id = b.ID
	return err
}

// A crash-recovery look-up never takes another installation's provider
// batch for its own. Each provider batch row carries a random tag at the
// provider, not its row id, which a second database on the same account
// numbers alike: the lost create is found by its own tag, no line is sent
// twice, and the foreign batch is left alone.
func TestBatchLookUpIgnoresAnotherInstallationsBatch(t *testing.T) {
	t.Parallel()
	b, _ := setupBatch(t, fakeprovider.Scenario{}, "batch", tweaks{})
	// The first create's answer is lost, and the other installation's
	// batch is created before the worker looks its own up.
	foreign := &foreignBatch{}
	b.opts.HTTPClient = &http.Client{Transport: &lossyCreate{afterLoss: foreign.create}}
	const n = 12
	b.oneGather(n, 5*time.Second)
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	require.NotEmpty(t, foreign.id, "the other installation's batch exists")

	stats := b.fake.Stats()
	require.Equal(t, 2, stats.Batches.Created, "ours, found again after its lost answer, and the foreign one; none sent twice")
	require.Zero(t, stats.DoubleBilledRecords)
	var recorded []string
	rows, err := b.db.Pool.Query(context.Background(), `SELECT provider_batch_id FROM triage_provider_batch WHERE provider_batch_id IS NOT NULL`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		recorded = append(recorded, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, recorded, 1)
	require.NotEqual(t, foreign.id, recorded[0], "the foreign batch is not recorded as ours")
}
