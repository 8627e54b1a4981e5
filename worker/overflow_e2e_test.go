package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/operator"
	"github.com/triage-dev/triage/worker/workertest"
)

// longRecords: r002 carries a note of about 3,000 tokens, over the fake's
// 2,000-token context; the others fit.
func longRecords() []ledger.Record {
	return records(3, func(i int) string {
		if i == 1 {
			return `,"note":"` + strings.Repeat("lorem ipsum ", 1000) + `"`
		}
		return ""
	})
}

func recordAttempts(t *testing.T, b *testBundle, batch, id string) []ledger.Attempt {
	t.Helper()
	as, err := ledger.ListAttempts(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: batch, RecordID: id})
	require.NoError(t, err)
	return as
}

func results(t *testing.T, b *testBundle, batch string) map[string]ledger.ResultRow {
	t.Helper()
	out := map[string]ledger.ResultRow{}
	for r, err := range ledger.Results(context.Background(), b.db.Pool, batch) {
		require.NoError(t, err)
		out[r.ID] = r
	}
	return out
}

// TestOverflowTruncateCostsTwoCalls: with on_overflow = "truncate" a record
// too long for the model costs exactly two calls, the original and one
// truncated under its own idempotency key, and completes marked truncated;
// for OpenAI's and Anthropic's wording alike.
func TestOverflowTruncateCostsTwoCalls(t *testing.T) {
	t.Parallel()
	for _, vendor := range []string{"openai", "anthropic"} {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeprovider.Scenario{NoReplay: true, Poison: fakeprovider.Poison{ContextTokens: 2000}},
				tweaks{vendor: vendor, extraPipeline: "max_tokens = 256\non_overflow = \"truncate\"\n"})
			b.enqueue(t, "b1", longRecords())
			b.start(t)

			st := b.waitSettled(t, "b1", 30*time.Second)
			require.Equal(t, 3, st.Completed)
			require.Zero(t, st.DeadLettered)
			stats := b.fake.Stats()
			require.Equal(t, 2, stats.ByRecord["r002"].Requests, "the original and one truncated call")
			require.Equal(t, 4, stats.Requests)
			require.Equal(t, 1, stats.ByAction[fakeprovider.ActionContextLength])
			require.Zero(t, stats.DoubleBilledRecords)

			as := recordAttempts(t, b, "b1", "r002")
			require.Len(t, as, 2)
			first, second := as[1], as[0] // newest first
			require.Equal(t, "context_length", *first.Reason)
			require.Equal(t, "", first.Change)
			require.Equal(t, ledger.AttemptOK, second.Status)
			require.Equal(t, ledger.ChangeTruncated, second.Change)
			require.NotEqual(t, first.IdempotencyKey, second.IdempotencyKey, "a changed request has its own key")
			require.NotEqual(t, first.RequestHash, second.RequestHash)

			res := results(t, b, "b1")
			require.True(t, ledger.Truncated(res["r002"].Change))
			require.False(t, ledger.Truncated(res["r001"].Change))
		})
	}
}

// TestOverflowDefaultDeadLetters: by default the record costs one call and
// is dead-lettered as context_length, unchanged.
func TestOverflowDefaultDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true, Poison: fakeprovider.Poison{ContextTokens: 2000}},
		tweaks{extraPipeline: "max_tokens = 256\n"})
	b.enqueue(t, "b1", longRecords())
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, 1, st.DeadLettered)
	stats := b.fake.Stats()
	require.Equal(t, 1, stats.ByRecord["r002"].Requests)
	require.Equal(t, 3, stats.Requests)
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Equal(t, "context_length", dls[0].Reason)
	require.Contains(t, dls[0].ErrorExcerpt, `on_overflow = "truncate"`)
	require.Len(t, recordAttempts(t, b, "b1", "r002"), 1)
}

// TestOverflowSecondRejectionDeadLetters: the truncated retry is classified
// again; a second rejection is dead-lettered, and the record's attempts show
// both calls. Never a third.
func TestOverflowSecondRejectionDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true,
		RecordScripts: map[string][]fakeprovider.Step{"r001": steps(act(fakeprovider.ActionContextLength), act(fakeprovider.ActionContextLength), status(200))}},
		tweaks{extraPipeline: "max_tokens = 256\non_overflow = \"truncate\"\n"})
	b.enqueue(t, "b1", records(1, func(int) string { return `,"note":"` + strings.Repeat("x", 400) + `"` }))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 1, st.DeadLettered)
	require.Equal(t, 2, b.fake.Stats().ByRecord["r001"].Requests)
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Equal(t, "context_length", dls[0].Reason)
	require.Contains(t, dls[0].ErrorExcerpt, "after the one changed retry")
	require.Contains(t, string(dls[0].Request), `"change": "truncated"`)
	as := recordAttempts(t, b, "b1", "r001")
	require.Len(t, as, 2)
	require.Equal(t, ledger.ChangeTruncated, as[0].Change)
	require.Equal(t, "", as[1].Change)

	// dlq show (and the dead-letter page) show both calls, oldest first.
	det, err := operator.GetDeadLetter(context.Background(), b.db.Pool, dls[0].ID)
	require.NoError(t, err)
	require.Len(t, det.Calls, 2)
	require.Equal(t, "", det.Calls[0].Change)
	require.Equal(t, ledger.ChangeTruncated, det.Calls[1].Change)
	js, err := json.Marshal(det)
	require.NoError(t, err)
	require.Contains(t, string(js), `"change":"truncated"`)
}

// TestJSONModeRefusedRetriedWithout: an endpoint that refuses JSON mode
// (OpenAI's 400 naming response_format) gets the request once more without
// it, under its own idempotency key; the answer is still checked for a JSON
// object, and the record completes.
func TestJSONModeRefusedRetriedWithout(t *testing.T) {
	t.Parallel()
	fake := fakeprovider.New(fakeprovider.Scenario{NoReplay: true, APIKey: workertest.APIKey})
	var refused atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"response_format"`)) {
			refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			// github.com/mrwadams/stride-gpt/issues/19, as JSON.
			io.WriteString(w, `{"error":{"message":"Invalid parameter: 'response_format' of type 'json_object' is not supported with this model.","type":"invalid_request_error","param":"response_format","code":null}}`)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { fake.Close(); srv.Close() })
	b := &testBundle{db: dbtest.New(t, dbtest.Options{MaxConns: 60}), hooks: hooks{&workertest.Webhook{}}, fake: fake}
	toml := workertest.Config(workertest.ConfigOptions{BaseURL: srv.URL + "/v1", MaxAttempts: 6, Output: "json"})
	cfg, err := config.Parse([]byte(toml), "test.toml")
	require.NoError(t, err)
	b.cfg, b.tomlText, b.opts = cfg, toml, workertest.WorkerOptions(cfg, b.db.Schema)
	b.enqueue(t, "b1", records(2, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, int32(2), refused.Load(), "each record's first call")
	require.Equal(t, 2, fake.Stats().Requests, "and one call without JSON mode each")
	as := recordAttempts(t, b, "b1", "r001")
	require.Len(t, as, 2)
	require.Equal(t, "json_mode_refused", *as[1].Reason)
	require.Equal(t, ledger.ChangeDroppedJSON, as[0].Change)
	require.NotEqual(t, as[0].IdempotencyKey, as[1].IdempotencyKey)
	require.False(t, ledger.Truncated(results(t, b, "b1")["r001"].Change), "dropping JSON mode is no truncation")
}
