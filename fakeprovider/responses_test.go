package fakeprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

func respParams(id string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:        openai.ChatModelGPT4oMini,
		Instructions: openai.String(jsonSystem),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt(id))},
	}
}

func record(id string) option.RequestOption { return option.WithHeader(fakeprovider.RecordHeader, id) }

// The official SDK reads the fake's Responses API: a synchronous answer
// with its usage, a stream of typed events, and a background response
// polled to its end; the bill counts each once.
func TestResponsesSDK(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	ctx := ctxT(t)
	want := fakeprovider.ExpectedAnswer(prompt("r1"), true)

	res, err := b.openai.Responses.New(ctx, respParams("r1"), record("r1"))
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusCompleted, res.Status)
	require.Equal(t, want, res.OutputText())
	require.Equal(t, "output_text", res.Output[0].Content[0].Type)
	require.Positive(t, res.Usage.InputTokens)
	require.Positive(t, res.Usage.OutputTokens)
	require.Equal(t, res.Usage.InputTokens+res.Usage.OutputTokens, res.Usage.TotalTokens)
	require.Regexp(t, `^resp_[0-9a-f]{50}$`, res.ID)

	stream := b.openai.Responses.NewStreaming(ctx, respParams("r2"), record("r2"))
	var text string
	var types []string
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			final = ev.Response
		}
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	require.Equal(t, "response.created", types[0])
	require.Equal(t, "response.completed", types[len(types)-1])
	require.Equal(t, fakeprovider.ExpectedAnswer(prompt("r2"), true), text)
	require.Equal(t, text, final.OutputText())
	require.Positive(t, final.Usage.OutputTokens)

	p := respParams("r3")
	p.Background = openai.Bool(true)
	created, err := b.openai.Responses.New(ctx, p, record("r3"))
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusQueued, created.Status)
	require.True(t, created.Background)
	require.Empty(t, created.Output)
	require.Equal(t, 2, b.fp.Stats().BilledCalls, "a background response is billed when it ends")
	got, err := b.openai.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusInProgress, got.Status)
	got, err = b.openai.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusCompleted, got.Status)
	require.Equal(t, fakeprovider.ExpectedAnswer(prompt("r3"), true), got.OutputText())
	again, err := b.openai.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
	require.NoError(t, err)
	require.Equal(t, got.OutputText(), again.OutputText())

	st := b.fp.Stats()
	require.Equal(t, 3, st.BilledCalls, "each response billed once, polls free")
	require.Equal(t, 0, st.DoubleBilledRecords)
	require.Equal(t, 3, st.BackgroundPolls)
	require.Equal(t, int(res.Usage.InputTokens+final.Usage.InputTokens+got.Usage.InputTokens), st.InputTokens)
	require.Equal(t, int(res.Usage.OutputTokens+final.Usage.OutputTokens+got.Usage.OutputTokens), st.OutputTokens)

	_, err = b.openai.Responses.Get(ctx, "resp_nope", responses.ResponseGetParams{})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 404, apiErr.StatusCode)
}

// A background response cancelled before it ends is not billed; one that
// ended stays as it was.
func TestResponsesBackgroundCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	ctx := ctxT(t)
	p := respParams("c1")
	p.Background = openai.Bool(true)
	created, err := b.openai.Responses.New(ctx, p, record("c1"))
	require.NoError(t, err)
	_, err = b.openai.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
	require.NoError(t, err)
	cancelled, err := b.openai.Responses.Cancel(ctx, created.ID)
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusCancelled, cancelled.Status)
	got, err := b.openai.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusCancelled, got.Status, "a cancelled response stays cancelled")
	st := b.fp.Stats()
	require.Equal(t, 0, st.BilledCalls)
	require.Equal(t, 1, st.BackgroundCancels)
}

// The failures a Responses-API stream or background response carries, as
// the SDK reports them, and what each is billed.
func TestResponsesInBandFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		step       fakeprovider.Step
		background bool
		// lastType is the stream's last event; status the background
		// response's end.
		lastType, status, code, reason string
		billed                         int
	}{
		{name: "failed server_error", step: fakeprovider.Step{Action: fakeprovider.ActionStreamError}, lastType: "response.failed", code: "server_error", billed: 1},
		{name: "failed insufficient_quota", step: fakeprovider.Step{Action: fakeprovider.ActionStreamError, Code: "insufficient_quota"}, lastType: "response.failed", code: "insufficient_quota", billed: 1},
		{name: "error event", step: fakeprovider.Step{Action: fakeprovider.ActionStreamError, Code: "rate_limit_exceeded", Event: "error"}, lastType: "error", code: "rate_limit_exceeded", billed: 1},
		{name: "incomplete", step: fakeprovider.Step{Action: fakeprovider.ActionIncomplete}, lastType: "response.incomplete", reason: "max_output_tokens", billed: 1},
		{name: "incomplete content_filter", step: fakeprovider.Step{Action: fakeprovider.ActionIncomplete, Code: "content_filter"}, lastType: "response.incomplete", reason: "content_filter", billed: 1},
		{name: "background failed", step: fakeprovider.Step{Action: fakeprovider.ActionStreamError, Code: "server_error"}, background: true, status: "failed", code: "server_error", billed: 1},
		{name: "background incomplete", step: fakeprovider.Step{Action: fakeprovider.ActionIncomplete}, background: true, status: "incomplete", reason: "max_output_tokens", billed: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeprovider.Scenario{Script: []fakeprovider.Step{tc.step}})
			ctx := ctxT(t)
			p := respParams("f1")
			if tc.background {
				p.Background = openai.Bool(true)
				created, err := b.openai.Responses.New(ctx, p, record("f1"))
				require.NoError(t, err)
				var got *responses.Response
				for range 2 {
					got, err = b.openai.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
					require.NoError(t, err)
				}
				require.Equal(t, responses.ResponseStatus(tc.status), got.Status)
				require.Equal(t, tc.code, string(got.Error.Code))
				require.Equal(t, tc.reason, got.IncompleteDetails.Reason)
				require.Equal(t, tc.billed, b.fp.Stats().BilledCalls)
				return
			}
			stream := b.openai.Responses.NewStreaming(ctx, p, record("f1"))
			var last responses.ResponseStreamEventUnion
			var text string
			for stream.Next() {
				last = stream.Current()
				if last.Type == "response.output_text.delta" {
					text += last.Delta
				}
			}
			require.NoError(t, stream.Err(), "an in-band failure is an event, not a transport error")
			require.NoError(t, stream.Close())
			require.Equal(t, tc.lastType, last.Type)
			switch last.Type {
			case "response.failed":
				require.Equal(t, tc.code, string(last.Response.Error.Code))
				require.Equal(t, responses.ResponseStatusFailed, last.Response.Status)
				require.Equal(t, text, last.Response.OutputText(), "the failed response holds what was generated")
			case "error":
				require.Equal(t, tc.code, last.Code)
				require.NotEmpty(t, last.Message)
			case "response.incomplete":
				require.Equal(t, tc.reason, last.Response.IncompleteDetails.Reason)
				require.Equal(t, text, last.Response.OutputText())
				require.Less(t, len(text), len(fakeprovider.ExpectedAnswer(prompt("f1"), true)), "cut short")
			}
			st := b.fp.Stats()
			require.Equal(t, tc.billed, st.BilledCalls)
			if last.Type == "response.failed" {
				require.Equal(t, int(last.Response.Usage.OutputTokens), st.OutputTokens, "the usage it reports is what it billed")
			}
		})
	}
}

// An answer longer than max_output_tokens ends incomplete, billed for the
// tokens it holds.
func TestResponsesMaxOutputTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	long := strings.Repeat("m", 80) // echoed: the answer is longer than 16 tokens
	p := respParams(long)
	p.MaxOutputTokens = openai.Int(16)
	res, err := b.openai.Responses.New(ctxT(t), p, record(long))
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusIncomplete, res.Status)
	require.Equal(t, "max_output_tokens", res.IncompleteDetails.Reason)
	require.EqualValues(t, 16, res.Usage.OutputTokens)
	require.Equal(t, 16, b.fp.Stats().OutputTokens)

	p.MaxOutputTokens = openai.Int(5)
	_, err = b.openai.Responses.New(ctxT(t), p, record("m2"))
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.StatusCode)
	require.Equal(t, "integer_below_min_value", apiErr.Code)
}

// The fake's faults reach the Responses API as they reach chat
// completions: HTTP errors before anything runs, a hang billed, no replay
// with replay off, and a background create's replay under its key.
func TestResponsesFaults(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Script: []fakeprovider.Step{{Action: fakeprovider.ActionRateLimit}, {Action: fakeprovider.ActionExhausted}}})
	ctx := ctxT(t)
	for _, code := range []string{"rate_limit_exceeded", "insufficient_quota"} {
		_, err := b.openai.Responses.New(ctx, respParams("x"), record("x"))
		var apiErr *openai.Error
		require.True(t, errors.As(err, &apiErr), "%v", err)
		require.Equal(t, 429, apiErr.StatusCode)
		require.Equal(t, code, apiErr.Code)
	}
	require.Equal(t, 0, b.fp.Stats().BilledCalls)

	// Background create repeated under its key before it ended: the same
	// response, one bill.
	p := respParams("k1")
	p.Background = openai.Bool(true)
	first, err := b.openai.Responses.New(ctx, p, record("k1"), option.WithHeader(fakeprovider.IdempotencyHeader, "idem-k1"))
	require.NoError(t, err)
	second, err := b.openai.Responses.New(ctx, p, record("k1"), option.WithHeader(fakeprovider.IdempotencyHeader, "idem-k1"))
	require.NoError(t, err)
	require.Equal(t, first.ID, second.ID)
	for range 2 {
		_, err = b.openai.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
		require.NoError(t, err)
	}
	st := b.fp.Stats()
	require.Equal(t, 1, st.BilledCalls)
	require.Equal(t, 1, st.BackgroundCreated)

	raw, err := json.Marshal(first)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"status":"queued"`)
}

// With replay off a repeated background create is a second response, billed
// again when it ends: the fake counts the double bill.
func TestResponsesBackgroundNoReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true})
	ctx := ctxT(t)
	p := respParams("n1")
	p.Background = openai.Bool(true)
	var ids []string
	for range 2 {
		r, err := b.openai.Responses.New(ctx, p, record("n1"), option.WithHeader(fakeprovider.IdempotencyHeader, "idem-n1"))
		require.NoError(t, err)
		ids = append(ids, r.ID)
		for range 2 {
			_, err = b.openai.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
			require.NoError(t, err)
		}
	}
	require.NotEqual(t, ids[0], ids[1])
	st := b.fp.Stats()
	require.Equal(t, 2, st.BilledCalls)
	require.Equal(t, 1, st.DoubleBilledRecords)
}

// A hung background create still made a response, which runs and is billed.
func TestResponsesBackgroundHang(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Script: []fakeprovider.Step{{Action: fakeprovider.ActionHang}}})
	ctx := ctxT(t)
	p := respParams("h1")
	p.Background = openai.Bool(true)
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.openai.Responses.New(hctx, p, record("h1"))
		done <- err
	}()
	require.NoError(t, b.fp.WaitFor(ctx, func(st fakeprovider.Stats) bool { return st.Hanging == 1 }))
	cancel()
	require.Error(t, <-done)
	st := b.fp.Stats()
	require.Equal(t, 1, st.BilledCalls)
	require.Equal(t, 1, st.BackgroundCreated)
}
