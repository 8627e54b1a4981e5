package fakeprovider_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

func dur(d time.Duration) fakeprovider.Duration { return fakeprovider.Duration(d) }

// oaBatchLine is one input line: a chat completion for record id, whose
// custom_id is the job's idempotency key.
func oaBatchLine(customID, userText string) string {
	b, _ := json.Marshal(map[string]any{
		"custom_id": customID, "method": "POST", "url": "/v1/chat/completions",
		"body": map[string]any{"model": "gpt-4o-mini", "messages": []map[string]string{
			{"role": "system", "content": jsonSystem}, {"role": "user", "content": userText}}},
	})
	return string(b)
}

func oaBatchFile(ids []string, user func(id string) string) []byte {
	var buf bytes.Buffer
	for _, id := range ids {
		buf.WriteString(oaBatchLine("key-"+id, user(id)))
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

func recordIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%02d", i)
	}
	return ids
}

// oaOutputLine is a line of an output or error file, decoded with the SDK's
// own types where it has them.
type oaOutputLine struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (b *testBundle) oaSubmit(t *testing.T, ctx context.Context, data []byte) *openai.Batch {
	t.Helper()
	f, err := b.openai.Files.New(ctx, openai.FileNewParams{
		File: openai.File(bytes.NewReader(data), "input.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	require.NoError(t, err)
	require.Equal(t, "batch", string(f.Purpose))
	require.Equal(t, int64(len(data)), f.Bytes)
	require.True(t, strings.HasPrefix(f.ID, "file-"), f.ID)
	batch, err := b.openai.Batches.New(ctx, openai.BatchNewParams{
		InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	require.NoError(t, err)
	require.Equal(t, f.ID, batch.InputFileID)
	require.True(t, strings.HasPrefix(batch.ID, "batch_"), batch.ID)
	return batch
}

func (b *testBundle) oaGet(t *testing.T, ctx context.Context, id string) *openai.Batch {
	t.Helper()
	batch, err := b.openai.Batches.Get(ctx, id)
	require.NoError(t, err)
	return batch
}

// oaFile downloads a result file through the SDK and decodes every line.
func (b *testBundle) oaFile(t *testing.T, ctx context.Context, id string) []oaOutputLine {
	t.Helper()
	if id == "" {
		return nil
	}
	resp, err := b.openai.Files.Content(ctx, id)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out []oaOutputLine
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l oaOutputLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), "every line is one JSON object: %s", sc.Text())
		require.True(t, strings.HasPrefix(l.ID, "batch_req_"), l.ID)
		out = append(out, l)
	}
	require.NoError(t, sc.Err())
	return out
}

func customIDs(lines []oaOutputLine) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.CustomID
	}
	return out
}

func TestOpenAIBatchRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Seed: 3,
		Poison: fakeprovider.Poison{InvalidMarker: "POISON_INVALID"},
		Batch:  fakeprovider.BatchScenario{ValidateFor: dur(time.Minute), Latency: dur(time.Hour)}})
	ctx := ctxT(t)
	ids := recordIDs(20)
	poisoned := map[string]bool{"r03": true, "r11": true}
	user := func(id string) string {
		if poisoned[id] {
			return prompt(id) + " POISON_INVALID"
		}
		return prompt(id)
	}
	batch := b.oaSubmit(t, ctx, oaBatchFile(ids, user))
	require.Equal(t, openai.BatchStatusValidating, batch.Status)
	require.Zero(t, batch.RequestCounts.Total, "counts appear after validation")
	require.Equal(t, batch.CreatedAt+24*3600, batch.ExpiresAt)

	require.Equal(t, openai.BatchStatusValidating, b.oaGet(t, ctx, batch.ID).Status)
	b.clock.Advance(time.Minute)
	got := b.oaGet(t, ctx, batch.ID)
	require.Equal(t, openai.BatchStatusInProgress, got.Status)
	require.Equal(t, int64(20), got.RequestCounts.Total)
	require.Zero(t, got.RequestCounts.Completed+got.RequestCounts.Failed)
	require.Equal(t, "gpt-4o-mini", got.Model)

	b.clock.Advance(30 * time.Minute)
	got = b.oaGet(t, ctx, batch.ID)
	require.Equal(t, openai.BatchStatusInProgress, got.Status)
	require.Equal(t, int64(10), got.RequestCounts.Completed+got.RequestCounts.Failed, "lines finish spread over the latency")
	require.Empty(t, got.OutputFileID, "results come when the batch ends")

	b.clock.Advance(30 * time.Minute)
	got = b.oaGet(t, ctx, batch.ID)
	require.Equal(t, openai.BatchStatusCompleted, got.Status)
	require.Equal(t, int64(18), got.RequestCounts.Completed)
	require.Equal(t, int64(2), got.RequestCounts.Failed)
	require.NotZero(t, got.CompletedAt)
	require.NotZero(t, got.FinalizingAt)

	out := b.oaFile(t, ctx, got.OutputFileID)
	require.Len(t, out, 18)
	var wantUSD float64
	for _, l := range out {
		require.Nil(t, l.Error)
		require.Equal(t, 200, l.Response.StatusCode)
		require.NotEmpty(t, l.Response.RequestID)
		var cc openai.ChatCompletion
		require.NoError(t, json.Unmarshal(l.Response.Body, &cc))
		id := strings.TrimPrefix(l.CustomID, "key-")
		require.Equal(t, fakeprovider.ExpectedAnswer(prompt(id), true), cc.Choices[0].Message.Content)
		require.Equal(t, "chat.completion", string(cc.Object))
		wantUSD += float64(cc.Usage.PromptTokens)*fakeprovider.InputUSDPerMTokDefault/2/1e6 +
			float64(cc.Usage.CompletionTokens)*fakeprovider.OutputUSDPerMTokDefault/2/1e6
	}
	order := customIDs(out)
	require.False(t, sort.StringsAreSorted(order), "results come out of input order: %v", order)

	errs := b.oaFile(t, ctx, got.ErrorFileID)
	require.Len(t, errs, 2)
	for _, l := range errs {
		require.True(t, poisoned[strings.TrimPrefix(l.CustomID, "key-")], l.CustomID)
		require.Nil(t, l.Error, "an API error is a response, not a line error")
		require.Equal(t, 400, l.Response.StatusCode)
		var env struct {
			Error struct{ Type, Code, Param string }
		}
		require.NoError(t, json.Unmarshal(l.Response.Body, &env))
		require.Equal(t, "invalid_request_error", env.Error.Type)
		require.Equal(t, "integer_below_min_value", env.Error.Code, "the same body a synchronous call gets")
	}

	st := b.fp.Stats()
	require.Equal(t, 20, st.Requests, "every line reached the model")
	require.Equal(t, 18, st.BilledCalls)
	require.InDelta(t, wantUSD, st.BilledUSD, 1e-12, "billed at half the synchronous price")
	require.InDelta(t, st.BilledUSD, st.Batches.BilledUSD, 1e-12)
	require.Zero(t, st.DoubleBilledRecords)
	require.Equal(t, 18, st.Batches.Succeeded)
	require.Equal(t, 2, st.Batches.Errored)
	require.Equal(t, 20, st.Batches.Lines)
	require.Equal(t, []int{400}, st.ByRecord["key-r03"].Statuses, "lines are recorded by custom_id")
	require.Equal(t, []string{"key-r03"}, st.ByRecord["key-r03"].IdempotencyKeys)

	// The same seed gives the same order: results are shuffled, not random.
	b2 := setup(t, fakeprovider.Scenario{Seed: 3, Poison: fakeprovider.Poison{InvalidMarker: "POISON_INVALID"}})
	again := b2.oaGet(t, ctx, b2.oaSubmit(t, ctx, oaBatchFile(ids, user)).ID)
	require.Equal(t, openai.BatchStatusCompleted, again.Status, "zero latency: done at once")
	require.Equal(t, order, customIDs(b2.oaFile(t, ctx, again.OutputFileID)))
}

func TestOpenAIBatchExpiresWithPartialResults(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: dur(time.Hour), ExpireShare: 0.3}})
	ctx := ctxT(t)
	batch := b.oaSubmit(t, ctx, oaBatchFile(recordIDs(10), prompt))
	b.clock.Advance(2 * time.Hour)
	got := b.oaGet(t, ctx, batch.ID)
	require.Equal(t, openai.BatchStatusInProgress, got.Status, "30 % never finish; the batch waits for its window")
	require.Equal(t, int64(7), got.RequestCounts.Completed)

	b.clock.Advance(22 * time.Hour)
	got = b.oaGet(t, ctx, batch.ID)
	require.Equal(t, openai.BatchStatusExpired, got.Status)
	require.Equal(t, got.ExpiresAt, got.ExpiredAt)
	require.Equal(t, int64(7), got.RequestCounts.Completed)
	require.Zero(t, got.RequestCounts.Failed, "expired lines count in neither, as OpenAI reports them")

	out := b.oaFile(t, ctx, got.OutputFileID)
	require.Len(t, out, 7, "expired batches return the work they did")
	errs := b.oaFile(t, ctx, got.ErrorFileID)
	require.Len(t, errs, 3)
	for _, l := range errs {
		require.Nil(t, l.Response)
		require.Equal(t, "batch_expired", l.Error.Code)
		require.Equal(t, "This request could not be executed before the completion window expired.", l.Error.Message)
	}
	seen := slices.Concat(customIDs(out), customIDs(errs))
	sort.Strings(seen)
	require.Len(t, slices.Compact(seen), 10, "every line is accounted for once")

	st := b.fp.Stats()
	require.Equal(t, 7, st.BilledCalls, "the completed work is charged")
	require.Equal(t, 7, st.Requests)
	require.Equal(t, 3, st.Batches.Expired)
}

func TestOpenAIBatchExpiresWhenLatencyOutrunsTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: dur(48 * time.Hour)}})
	ctx := ctxT(t)
	batch := b.oaSubmit(t, ctx, oaBatchFile(recordIDs(10), prompt))
	b.clock.Advance(25 * time.Hour)
	got := b.oaGet(t, ctx, batch.ID)
	require.Equal(t, openai.BatchStatusExpired, got.Status)
	require.Equal(t, int64(4), got.RequestCounts.Completed, "lines due before the 24th hour ran")
	require.Len(t, b.oaFile(t, ctx, got.ErrorFileID), 6)
}

func TestOpenAIBatchValidationFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	ctx := ctxT(t)
	data := oaBatchLine("a", prompt("a")) + "\n" +
		`{"custom_id": "b", "method": "POST", "url": ` + "\n" +
		oaBatchLine("a", prompt("c")) + "\n" +
		strings.Replace(oaBatchLine("d", prompt("d")), "/v1/chat/completions", "/v1/embeddings", 1) + "\n"
	batch := b.oaSubmit(t, ctx, []byte(data))
	got := b.oaGet(t, ctx, batch.ID)
	require.Equal(t, openai.BatchStatusFailed, got.Status)
	require.NotZero(t, got.FailedAt)
	require.Empty(t, got.OutputFileID)
	require.Empty(t, got.ErrorFileID)
	type e struct {
		code string
		line int64
	}
	var errs []e
	for _, d := range got.Errors.Data {
		require.NotEmpty(t, d.Message)
		errs = append(errs, e{d.Code, d.Line})
	}
	require.Equal(t, []e{{"invalid_json_line", 2}, {"duplicate_custom_id", 3}, {"url_mismatch", 4}}, errs)
	require.Equal(t, "This line is not parseable as valid JSON.", got.Errors.Data[0].Message)
	st := b.fp.Stats()
	require.Zero(t, st.Requests, "a batch that fails validation runs nothing")
	require.Zero(t, st.BilledCalls)
	require.Equal(t, 1, st.Batches.FailedValidation)

	// A scripted failure fails a well-formed file the same way.
	fv := setup(t, fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{
		FailValidation: &fakeprovider.BatchError{Code: "too_many_tasks", Message: "Enqueued token limit reached."}}})
	batch = fv.oaSubmit(t, ctx, oaBatchFile(recordIDs(3), prompt))
	got = fv.oaGet(t, ctx, batch.ID)
	require.Equal(t, openai.BatchStatusFailed, got.Status)
	require.Equal(t, "too_many_tasks", got.Errors.Data[0].Code)
	require.False(t, got.Errors.Data[0].JSON.Line.Valid() && got.Errors.Data[0].Line != 0, "a file-level error has no line")

	// Too many requests for the batch limit.
	lim := setup(t, fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{MaxRequests: 2}})
	batch = lim.oaSubmit(t, ctx, oaBatchFile(recordIDs(3), prompt))
	got = lim.oaGet(t, ctx, batch.ID)
	require.Equal(t, openai.BatchStatusFailed, got.Status)
	require.Equal(t, "too_many_tasks", got.Errors.Data[0].Code)
}

func TestOpenAIBatchCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: dur(time.Hour), CancelFor: dur(10 * time.Minute)}})
	ctx := ctxT(t)
	batch := b.oaSubmit(t, ctx, oaBatchFile(recordIDs(10), prompt))
	b.clock.Advance(30 * time.Minute)
	got, err := b.openai.Batches.Cancel(ctx, batch.ID)
	require.NoError(t, err)
	require.Equal(t, openai.BatchStatusCancelling, got.Status)
	require.NotZero(t, got.CancellingAt)
	require.Equal(t, int64(5), got.RequestCounts.Completed)

	b.clock.Advance(5 * time.Minute)
	require.Equal(t, openai.BatchStatusCancelling, b.oaGet(t, ctx, batch.ID).Status)
	b.clock.Advance(5 * time.Minute)
	got = b.oaGet(t, ctx, batch.ID)
	require.Equal(t, openai.BatchStatusCancelled, got.Status)
	require.NotZero(t, got.CancelledAt)
	require.Len(t, b.oaFile(t, ctx, got.OutputFileID), 5, "partial results of a cancelled batch")
	require.Empty(t, got.ErrorFileID, "lines that never ran are in no file")

	_, err = b.openai.Batches.Cancel(ctx, batch.ID)
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.StatusCode)

	st := b.fp.Stats()
	require.Equal(t, 5, st.BilledCalls)
	require.Equal(t, 5, st.Batches.Canceled)
}

// Lines go through the same per-request rules as synchronous calls: the
// balance runs out mid-batch and the rest get the vendor's quota error.
func TestOpenAIBatchBalanceRunsOutMidBatch(t *testing.T) {
	t.Parallel()
	price := fakeprovider.Price{InputUSDPerMTok: 5000, OutputUSDPerMTok: 5000}
	b := setup(t, fakeprovider.Scenario{Price: price, Balance: &fakeprovider.Balance{USD: 1}})
	ctx := ctxT(t)
	batch := b.oaSubmit(t, ctx, oaBatchFile(recordIDs(10), prompt))
	got := b.oaGet(t, ctx, batch.ID)
	require.Equal(t, openai.BatchStatusCompleted, got.Status)
	require.Positive(t, got.RequestCounts.Completed)
	require.Positive(t, got.RequestCounts.Failed)
	for _, l := range b.oaFile(t, ctx, got.ErrorFileID) {
		require.Equal(t, 429, l.Response.StatusCode)
		require.Contains(t, string(l.Response.Body), `"code":"insufficient_quota"`)
	}
	st := b.fp.Stats()
	require.Equal(t, int(got.RequestCounts.Completed), st.BilledCalls)
	require.LessOrEqual(t, *st.BalanceUSD, 0.0)

	// With the balance spent, creating a batch is refused outright.
	f, err := b.openai.Files.New(ctx, openai.FileNewParams{
		File: openai.File(bytes.NewReader(oaBatchFile(recordIDs(1), prompt)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	require.NoError(t, err)
	_, err = b.openai.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID,
		Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 429, apiErr.StatusCode)
	require.Equal(t, "insufficient_quota", apiErr.Code)
}

// A custom_id billed twice, across batches or once sync (as the
// Idempotency-Key) and once in a batch, is a double bill.
func TestOpenAIBatchDoubleBills(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	ctx := ctxT(t)
	data := oaBatchFile([]string{"r1", "r2"}, prompt)
	b.oaSubmit(t, ctx, data)
	b.oaSubmit(t, ctx, data) // a resubmission of the same jobs
	st := b.fp.Stats()
	require.Equal(t, 4, st.BilledCalls)
	require.Equal(t, 2, st.DoubleBilledRecords)
	require.Equal(t, 2, st.ByRecord["key-r1"].Billed)

	// Synchronous first, then the same key as a batch line.
	r, err := b.post(t, ctx, "openai", rawBody("openai", "r3", false), map[string]string{
		fakeprovider.RecordHeader: "r3", fakeprovider.IdempotencyHeader: "key-r3"})
	require.NoError(t, err)
	require.Equal(t, 200, r.status)
	b.oaSubmit(t, ctx, oaBatchFile([]string{"r3"}, prompt))
	require.Equal(t, 3, b.fp.Stats().DoubleBilledRecords)
}

func TestOpenAIFilesAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	ctx := ctxT(t)
	data := oaBatchFile(recordIDs(2), prompt)
	f, err := b.openai.Files.New(ctx, openai.FileNewParams{
		File: openai.File(bytes.NewReader(data), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	require.NoError(t, err)
	require.Equal(t, "in.jsonl", f.Filename)
	require.Equal(t, f.CreatedAt+30*24*3600, f.ExpiresAt, "batch files expire after 30 days")

	got, err := b.openai.Files.Get(ctx, f.ID)
	require.NoError(t, err)
	require.Equal(t, f.ID, got.ID)
	resp, err := b.openai.Files.Content(ctx, f.ID)
	require.NoError(t, err)
	back, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, data, back)

	del, err := b.openai.Files.Delete(ctx, f.ID)
	require.NoError(t, err)
	require.True(t, del.Deleted)
	_, err = b.openai.Files.Get(ctx, f.ID)
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 404, apiErr.StatusCode)

	_, err = b.openai.Batches.Get(ctx, "batch_nope")
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 404, apiErr.StatusCode)

	_, err = b.openai.Batches.New(ctx, openai.BatchNewParams{InputFileID: "file-nope",
		Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.StatusCode)
	require.Equal(t, "input_file_id", apiErr.Param)
}

// A submitter that crashed between creating a batch and recording its id
// finds it again by listing, newest first, with the metadata it sent.
func TestOpenAIBatchListAndMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	ctx := ctxT(t)
	var want []string
	for i := range 3 {
		f, err := b.openai.Files.New(ctx, openai.FileNewParams{
			File: openai.File(bytes.NewReader(oaBatchFile(recordIDs(1), prompt)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
		require.NoError(t, err)
		batch, err := b.openai.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID,
			Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
			Metadata: map[string]string{"submission": fmt.Sprint(i)}})
		require.NoError(t, err)
		want = append([]string{batch.ID}, want...)
	}
	var got []string
	iter := b.openai.Batches.ListAutoPaging(ctx, openai.BatchListParams{Limit: openai.Int(2)})
	for iter.Next() {
		got = append(got, iter.Current().ID)
	}
	require.NoError(t, iter.Err())
	require.Equal(t, want, got, "newest first, across pages")
	first := b.oaGet(t, ctx, want[2])
	require.Equal(t, "0", first.Metadata["submission"])
}

func TestBatchScenarioParses(t *testing.T) {
	t.Parallel()
	sc, err := fakeprovider.ParseScenario(strings.NewReader(`{"batch": {
		"validate_for": "1m", "latency": 2700, "finalize_for": "1m", "expire_after": "24h",
		"expire_share": 0.3, "cancel_for": "10m", "max_requests": 100,
		"price": {"input_usd_per_mtok": 0.075, "output_usd_per_mtok": 0.3},
		"fail_validation": {"code": "invalid_json_line", "line": 1, "message": "This line is not parseable as valid JSON."}}}`))
	require.NoError(t, err)
	require.Equal(t, dur(45*time.Minute), sc.Batch.Latency, "a bare number is seconds")
	require.Equal(t, 0.3, sc.Batch.ExpireShare)
	require.Equal(t, 1, sc.Batch.FailValidation.Line)
	for _, bad := range []string{
		`{"batch": {"latency": "-1s"}}`,
		`{"batch": {"expire_share": 1.5}}`,
		`{"batch": {"fail_validation": {"message": "no code"}}}`,
		`{"batch": {"latencyy": "1s"}}`,
	} {
		_, err := fakeprovider.ParseScenario(strings.NewReader(bad))
		require.Error(t, err, bad)
	}
}
