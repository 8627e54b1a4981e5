package fakeprovider_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

func anBatchParams(ids []string, user func(id string) string) anthropic.MessageBatchNewParams {
	var p anthropic.MessageBatchNewParams
	for _, id := range ids {
		p.Requests = append(p.Requests, anthropic.MessageBatchNewParamsRequest{
			CustomID: "key-" + id,
			Params: anthropic.MessageBatchNewParamsRequestParams{
				Model:     anthropic.ModelClaudeSonnet4_5,
				MaxTokens: 1024,
				System:    []anthropic.TextBlockParam{{Text: jsonSystem}},
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(user(id)))},
			},
		})
	}
	return p
}

func (b *testBundle) anGet(t *testing.T, ctx context.Context, id string) *anthropic.MessageBatch {
	t.Helper()
	got, err := b.anth.Messages.Batches.Get(ctx, id, anthropic.MessageBatchGetParams{})
	require.NoError(t, err)
	return got
}

// anResults streams the results with the SDK and decodes every line.
func (b *testBundle) anResults(t *testing.T, ctx context.Context, id string) []anthropic.MessageBatchIndividualResponse {
	t.Helper()
	stream := b.anth.Messages.Batches.ResultsStreaming(ctx, id, anthropic.MessageBatchResultsParams{})
	defer stream.Close()
	var out []anthropic.MessageBatchIndividualResponse
	for stream.Next() {
		out = append(out, stream.Current())
	}
	require.NoError(t, stream.Err())
	return out
}

func TestAnthropicBatchRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Seed: 5,
		Poison:        fakeprovider.Poison{InvalidMarker: "POISON_INVALID", PolicyMarker: "POISON_POLICY"},
		RecordScripts: map[string][]fakeprovider.Step{"key-r07": {{Action: fakeprovider.ActionOverloaded}}},
		Batch:         fakeprovider.BatchScenario{Latency: dur(time.Hour), FinalizeFor: dur(time.Minute)}})
	ctx := ctxT(t)
	ids := recordIDs(12)
	user := func(id string) string {
		switch id {
		case "r02":
			return prompt(id) + " POISON_INVALID"
		case "r05":
			return prompt(id) + " POISON_POLICY"
		}
		return prompt(id)
	}
	batch, err := b.anth.Messages.Batches.New(ctx, anBatchParams(ids, user))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(batch.ID, "msgbatch_01"), batch.ID)
	require.Equal(t, anthropic.MessageBatchProcessingStatusInProgress, batch.ProcessingStatus)
	require.Equal(t, int64(12), batch.RequestCounts.Processing)
	require.Equal(t, batch.CreatedAt.Add(24*time.Hour), batch.ExpiresAt)
	require.Empty(t, batch.ResultsURL)

	// Results are not there before the batch ends.
	early := b.anth.Messages.Batches.ResultsStreaming(ctx, batch.ID, anthropic.MessageBatchResultsParams{})
	require.False(t, early.Next())
	var apiErr *anthropic.Error
	require.ErrorAs(t, early.Err(), &apiErr)
	require.Equal(t, 400, apiErr.StatusCode)
	early.Close()

	b.clock.Advance(time.Hour)
	got := b.anGet(t, ctx, batch.ID)
	require.Equal(t, anthropic.MessageBatchProcessingStatusInProgress, got.ProcessingStatus, "still finalizing")
	require.Equal(t, int64(12), got.RequestCounts.Processing)
	require.Zero(t, got.RequestCounts.Succeeded, "counts stay zero until the batch ends")
	b.clock.Advance(time.Minute)
	got = b.anGet(t, ctx, batch.ID)
	require.Equal(t, anthropic.MessageBatchProcessingStatusEnded, got.ProcessingStatus)
	require.Zero(t, got.RequestCounts.Processing)
	require.Equal(t, int64(10), got.RequestCounts.Succeeded, "a refusal is a billed success")
	require.Equal(t, int64(2), got.RequestCounts.Errored)
	require.Equal(t, batch.CreatedAt.Add(time.Hour+time.Minute), got.EndedAt)
	require.Equal(t, b.srv.URL+"/v1/messages/batches/"+batch.ID+"/results", got.ResultsURL)

	res := b.anResults(t, ctx, batch.ID)
	require.Len(t, res, 12)
	var order []string
	for _, r := range res {
		order = append(order, r.CustomID)
		id := strings.TrimPrefix(r.CustomID, "key-")
		switch id {
		case "r02":
			require.Equal(t, "errored", r.Result.Type)
			e := r.Result.AsErrored().Error
			require.Equal(t, "error", string(e.Type), "the usual envelope")
			require.Equal(t, "invalid_request_error", e.Error.Type)
			require.Contains(t, e.Error.Message, "max_tokens")
			require.True(t, strings.HasPrefix(e.RequestID, "req_"), e.RequestID)
		case "r07":
			require.Equal(t, "errored", r.Result.Type)
			require.Equal(t, "overloaded_error", r.Result.AsErrored().Error.Error.Type, "record scripts apply to lines by custom_id")
		case "r05":
			require.Equal(t, "succeeded", r.Result.Type)
			require.Equal(t, anthropic.StopReasonRefusal, r.Result.AsSucceeded().Message.StopReason)
		default:
			require.Equal(t, "succeeded", r.Result.Type)
			msg := r.Result.AsSucceeded().Message
			require.Equal(t, fakeprovider.ExpectedAnswer(prompt(id), true), msg.Content[0].Text)
			require.Positive(t, msg.Usage.InputTokens)
		}
	}
	require.False(t, sort.StringsAreSorted(order), "results come out of input order: %v", order)

	st := b.fp.Stats()
	require.Equal(t, 12, st.Requests)
	require.Equal(t, 10, st.BilledCalls)
	require.Equal(t, 1, st.ByStatus[529])
	require.Equal(t, []fakeprovider.Action{fakeprovider.ActionOverloaded}, st.ByRecord["key-r07"].Actions)
}

func TestAnthropicBatchExpiredAndCanceled(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: dur(time.Hour), ExpireShare: 0.25}})
	ctx := ctxT(t)
	expiring, err := b.anth.Messages.Batches.New(ctx, anBatchParams(recordIDs(8), prompt))
	require.NoError(t, err)
	b.clock.Advance(30 * time.Minute)
	canceled, err := b.anth.Messages.Batches.New(ctx, anBatchParams([]string{"c0", "c1", "c2", "c3"}, prompt))
	require.NoError(t, err)
	b.clock.Advance(30 * time.Minute) // the second batch is half done
	c, err := b.anth.Messages.Batches.Cancel(ctx, canceled.ID, anthropic.MessageBatchCancelParams{})
	require.NoError(t, err)
	require.Equal(t, anthropic.MessageBatchProcessingStatusCanceling, c.ProcessingStatus)
	require.False(t, c.CancelInitiatedAt.IsZero())

	got := b.anGet(t, ctx, canceled.ID)
	require.Equal(t, anthropic.MessageBatchProcessingStatusEnded, got.ProcessingStatus)
	require.Equal(t, int64(2), got.RequestCounts.Succeeded)
	require.Equal(t, int64(2), got.RequestCounts.Canceled)
	types := map[string]int{}
	for _, r := range b.anResults(t, ctx, canceled.ID) {
		types[r.Result.Type]++
	}
	require.Equal(t, map[string]int{"succeeded": 2, "canceled": 2}, types)

	require.Equal(t, anthropic.MessageBatchProcessingStatusInProgress, b.anGet(t, ctx, expiring.ID).ProcessingStatus)
	b.clock.Advance(23 * time.Hour)
	got = b.anGet(t, ctx, expiring.ID)
	require.Equal(t, anthropic.MessageBatchProcessingStatusEnded, got.ProcessingStatus)
	require.Equal(t, got.ExpiresAt, got.EndedAt)
	require.Equal(t, int64(6), got.RequestCounts.Succeeded)
	require.Equal(t, int64(2), got.RequestCounts.Expired)
	types = map[string]int{}
	for _, r := range b.anResults(t, ctx, expiring.ID) {
		types[r.Result.Type]++
		if r.Result.Type == "expired" {
			require.Empty(t, r.Result.AsErrored().Error.Error.Type)
		}
	}
	require.Equal(t, map[string]int{"succeeded": 6, "expired": 2}, types)

	_, err = b.anth.Messages.Batches.Cancel(ctx, expiring.ID, anthropic.MessageBatchCancelParams{})
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.StatusCode)

	// Results are kept 29 days from creation; the batch stays visible.
	b.clock.Advance(27 * 24 * time.Hour) // 28 days since creation
	require.Len(t, b.anResults(t, ctx, expiring.ID), 8)
	b.clock.Advance(24 * time.Hour)
	got = b.anGet(t, ctx, expiring.ID)
	require.Equal(t, expiring.CreatedAt.Add(29*24*time.Hour), got.ArchivedAt)
	gone := b.anth.Messages.Batches.ResultsStreaming(ctx, expiring.ID, anthropic.MessageBatchResultsParams{})
	require.False(t, gone.Next())
	require.ErrorAs(t, gone.Err(), &apiErr)
	require.Equal(t, 404, apiErr.StatusCode)
	gone.Close()

	st := b.fp.Stats()
	require.Equal(t, 8, st.BilledCalls, "only work done is billed")
	require.Equal(t, 2, st.Batches.Expired)
	require.Equal(t, 2, st.Batches.Canceled)
}

// The balance runs out mid-batch: the rest error with Anthropic's credit
// message, and a new batch is refused. Billing is at the scenario's batch price.
func TestAnthropicBatchBalanceAndPrice(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Price: fakeprovider.Price{InputUSDPerMTok: 3000, OutputUSDPerMTok: 15000},
		Balance: &fakeprovider.Balance{USD: 0.2},
		Batch:   fakeprovider.BatchScenario{Price: fakeprovider.Price{InputUSDPerMTok: 1000, OutputUSDPerMTok: 1000}}}
	b := setup(t, sc)
	ctx := ctxT(t)
	batch, err := b.anth.Messages.Batches.New(ctx, anBatchParams(recordIDs(10), prompt))
	require.NoError(t, err)
	var wantUSD float64
	errored := 0
	for _, r := range b.anResults(t, ctx, batch.ID) {
		switch r.Result.Type {
		case "succeeded":
			u := r.Result.AsSucceeded().Message.Usage
			wantUSD += float64(u.InputTokens+u.OutputTokens) * 1000 / 1e6
		case "errored":
			errored++
			e := r.Result.AsErrored().Error.Error
			require.Equal(t, "invalid_request_error", e.Type)
			require.Contains(t, e.Message, "credit balance is too low")
		}
	}
	require.Positive(t, errored)
	st := b.fp.Stats()
	require.InDelta(t, wantUSD, st.BilledUSD, 1e-9, "the scenario's batch price")
	require.Equal(t, errored, st.RequestsWhileExhausted)
	require.Equal(t, errored, st.Batches.LinesWhileExhausted, "the lines that ran while the balance was spent")

	_, err = b.anth.Messages.Batches.New(ctx, anBatchParams(recordIDs(1), prompt))
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.StatusCode)
	require.Contains(t, apiErr.Message, "credit balance is too low")
	// The refused create is a request the client sent while spent; it is
	// no line.
	st = b.fp.Stats()
	require.Equal(t, errored+1, st.RequestsWhileExhausted)
	require.Equal(t, errored, st.Batches.LinesWhileExhausted)
}

// A token bucket throttles lines as it throttles synchronous calls; a
// rejected batch (duplicate custom_id, scripted failure) runs nothing.
func TestAnthropicBatchRateLimitAndRejection(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{RateLimit: &fakeprovider.RateLimit{RequestsPerMinute: 3}})
	ctx := ctxT(t)
	batch, err := b.anth.Messages.Batches.New(ctx, anBatchParams(recordIDs(5), prompt))
	require.NoError(t, err)
	limited := 0
	for _, r := range b.anResults(t, ctx, batch.ID) {
		if r.Result.Type == "errored" {
			require.Equal(t, "rate_limit_error", r.Result.AsErrored().Error.Error.Type)
			limited++
		}
	}
	require.Equal(t, 2, limited, "three per minute, five at once")

	long := anBatchParams([]string{strings.Repeat("x", 61)}, prompt) // "key-" + 61 > 64
	_, err = b.anth.Messages.Batches.New(ctx, long)
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.StatusCode)
	require.Contains(t, apiErr.Message, "custom_id")

	dup := anBatchParams([]string{"x", "x"}, prompt)
	_, err = b.anth.Messages.Batches.New(ctx, dup)
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.StatusCode)
	require.Equal(t, "invalid_request_error", string(apiErr.Type()))

	fv := setup(t, fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{
		FailValidation: &fakeprovider.BatchError{Code: "invalid_request", Message: "requests.0.params.model: Field required"}}})
	_, err = fv.anth.Messages.Batches.New(ctx, anBatchParams(recordIDs(2), prompt))
	require.ErrorAs(t, err, &apiErr)
	require.Contains(t, apiErr.Message, "Field required")
	require.Zero(t, fv.fp.Stats().Requests)
	require.Zero(t, fv.fp.Stats().Batches.Created)

	_, err = b.anth.Messages.Batches.Get(ctx, "msgbatch_nope", anthropic.MessageBatchGetParams{})
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 404, apiErr.StatusCode)
}

// GET /__stats carries the batch counters, and a batch advances when the
// stats are read.
func TestBatchStatsEndpoint(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: dur(time.Minute)}})
	ctx := ctxT(t)
	_, err := b.anth.Messages.Batches.New(ctx, anBatchParams(recordIDs(4), prompt))
	require.NoError(t, err)
	require.Zero(t, b.fp.Stats().Requests)
	b.clock.Advance(time.Minute)
	resp, err := b.http.Get(b.srv.URL + "/__stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var st fakeprovider.Stats
	require.NoError(t, json.Unmarshal(raw, &st))
	require.Equal(t, 4, st.Requests)
	require.Equal(t, 1, st.Batches.Created)
	require.Equal(t, 4, st.Batches.Succeeded)
	require.Positive(t, st.Batches.Polls)
	require.Contains(t, string(raw), `"batches": {`)

	b.fp.Reset()
	require.Zero(t, b.fp.Stats().Batches.Created)
	_, err = b.anth.Messages.Batches.Get(ctx, "msgbatch_gone", anthropic.MessageBatchGetParams{})
	require.Error(t, err, "a reset forgets batches")
}

func TestAnthropicBatchList(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	ctx := ctxT(t)
	var want []string
	for range 3 {
		batch, err := b.anth.Messages.Batches.New(ctx, anBatchParams(recordIDs(1), prompt))
		require.NoError(t, err)
		want = append([]string{batch.ID}, want...)
	}
	var got []string
	iter := b.anth.Messages.Batches.ListAutoPaging(ctx, anthropic.MessageBatchListParams{Limit: anthropic.Int(2)})
	for iter.Next() {
		got = append(got, iter.Current().ID)
	}
	require.NoError(t, iter.Err())
	require.Equal(t, want, got, "newest first, across pages")
}

// Lines and synchronous calls share the scenario's request count, balance and
// buckets in time order: lines due before a synchronous call run before it,
// whether or not anyone polled the batch.
func TestBatchLinesRunBeforeLaterSyncCalls(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Script: []fakeprovider.Step{{Status: 200}, {Status: 200}, {Status: 429}},
		Batch: fakeprovider.BatchScenario{Latency: dur(2 * time.Minute)}})
	ctx := ctxT(t)
	_, err := b.anth.Messages.Batches.New(ctx, anBatchParams(recordIDs(2), prompt))
	require.NoError(t, err)
	b.clock.Advance(2 * time.Minute)
	_, err = b.anth.Messages.New(ctx, anParams("sync"))
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr, "the two lines took script steps 1 and 2")
	require.Equal(t, 429, apiErr.StatusCode)
}
