package provider_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/provider"
)

func responsesClient(t *testing.T, sc fakeprovider.Scenario, timeout time.Duration) (*provider.Client, *fakeprovider.Server) {
	t.Helper()
	sc.APIKey = fakeKey
	fp := fakeprovider.New(sc)
	srv := httptest.NewServer(fp)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = fp.Close() })
	c, err := provider.New(provider.Options{Vendor: "openai", Format: provider.FormatResponses, BaseURL: srv.URL + "/v1", APIKey: fakeKey, Timeout: timeout})
	require.NoError(t, err)
	require.Equal(t, provider.FormatResponses, c.Format())
	return c, fp
}

func responsesRequest(id string, stream bool) provider.Request {
	r := provider.Request{Model: "gpt-4o-mini", System: "Answer with one JSON object.", Prompt: `Record: {"id":"` + id + `"}`,
		MaxTokens: 64, JSON: true, Stream: stream, RecordID: id}
	r.IdempotencyKey = provider.IdempotencyKey("b", id, "enrich", provider.RequestHash(r))
	return r
}

// TestResponsesFormat: every in-band failure of the Responses API, sync
// and streamed, becomes an Observation the classifier decides by its code,
// and the usage the client reads is what the fake billed.
func TestResponsesFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		step   fakeprovider.Step
		stream bool
		phase  classify.Phase
		class  classify.Class
		reason string
		finish string
		whole  bool // the whole answer arrived
	}{
		{name: "ok", step: fakeprovider.Step{Action: fakeprovider.ActionOK}, phase: classify.PhaseResponse, class: classify.OK, finish: "completed", whole: true},
		{name: "ok/stream", step: fakeprovider.Step{Action: fakeprovider.ActionOK}, stream: true, phase: classify.PhaseResponse, class: classify.OK, finish: "completed", whole: true},
		{name: "429 insufficient_quota", step: fakeprovider.Step{Action: fakeprovider.ActionExhausted}, phase: classify.PhaseResponse, class: classify.Exhausted, reason: "billing_quota"},
		{name: "429 rate limit/stream", step: fakeprovider.Step{Action: fakeprovider.ActionRateLimit}, stream: true, phase: classify.PhaseResponse, class: classify.Throttled, reason: "rate_limit"},
		{name: "failed server_error/stream", step: fakeprovider.Step{Action: fakeprovider.ActionStreamError}, stream: true, phase: classify.PhaseStream, class: classify.Transient, reason: "stream_server_error", finish: "failed"},
		{name: "failed server_is_overloaded/stream", step: fakeprovider.Step{Action: fakeprovider.ActionStreamError, Code: "server_is_overloaded"}, stream: true, phase: classify.PhaseStream, class: classify.Transient, reason: "stream_server_error", finish: "failed"},
		{name: "failed insufficient_quota/stream", step: fakeprovider.Step{Action: fakeprovider.ActionStreamError, Code: "insufficient_quota"}, stream: true, phase: classify.PhaseStream, class: classify.Exhausted, reason: "stream_billing_quota", finish: "failed"},
		{name: "failed rate_limit_exceeded/stream", step: fakeprovider.Step{Action: fakeprovider.ActionStreamError, Code: "rate_limit_exceeded"}, stream: true, phase: classify.PhaseStream, class: classify.Throttled, reason: "stream_rate_limit", finish: "failed"},
		{name: "failed invalid_prompt/stream", step: fakeprovider.Step{Action: fakeprovider.ActionStreamError, Code: "invalid_prompt"}, stream: true, phase: classify.PhaseStream, class: classify.Rejected, reason: "stream_invalid_prompt", finish: "failed"},
		{name: "error event/stream", step: fakeprovider.Step{Action: fakeprovider.ActionStreamError, Code: "server_error", Event: "error"}, stream: true, phase: classify.PhaseStream, class: classify.Transient, reason: "stream_server_error"},
		{name: "incomplete max_output_tokens", step: fakeprovider.Step{Action: fakeprovider.ActionIncomplete}, phase: classify.PhaseResponse, class: classify.OK, finish: "max_output_tokens"},
		{name: "incomplete max_output_tokens/stream", step: fakeprovider.Step{Action: fakeprovider.ActionIncomplete}, stream: true, phase: classify.PhaseResponse, class: classify.OK, finish: "max_output_tokens"},
		{name: "incomplete content_filter/stream", step: fakeprovider.Step{Action: fakeprovider.ActionIncomplete, Code: "content_filter"}, stream: true, phase: classify.PhaseResponse, class: classify.OK, finish: "content_filter"},
		{name: "cut/stream", step: fakeprovider.Step{Action: fakeprovider.ActionCutStream}, stream: true, phase: classify.PhaseStream, class: classify.Ambiguous, reason: "stream_failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, fp := responsesClient(t, fakeprovider.Scenario{Script: []fakeprovider.Step{tc.step}, NoReplay: true}, 5*time.Second)
			r := responsesRequest("r1", tc.stream)
			res, err := c.Do(context.Background(), r)
			require.NoError(t, err)
			v := classify.Classify(res.Observation)
			require.Equal(t, tc.phase, res.Observation.Phase, res.Observation.Body)
			require.Equal(t, tc.class, v.Class, res.Observation.Body)
			if tc.reason != "" {
				require.Equal(t, tc.reason, v.Reason)
			}
			require.Equal(t, tc.finish, res.FinishReason)
			want := fakeprovider.ExpectedAnswer(r.Prompt, true)
			if tc.whole {
				require.Equal(t, want, res.Content)
				require.Empty(t, res.Malformed)
				require.Regexp(t, `^resp_`, res.ResponseID)
			} else if tc.class != classify.Exhausted && tc.class != classify.Throttled || tc.phase == classify.PhaseStream {
				require.Less(t, len(res.Content), len(want), "cut short")
			}
			st := fp.Stats()
			if st.BilledCalls > 0 && tc.step.Event == "" && tc.step.Action != fakeprovider.ActionCutStream {
				require.Equal(t, st.InputTokens, res.InputTokens, "the usage read is what was billed")
				require.Equal(t, st.OutputTokens, res.OutputTokens, "the usage read is what was billed")
			}
		})
	}
}

// TestResponsesStreamDecidedBySilence: a Responses stream follows the same
// rules as the others: a stalled one is cut by the idle timeout (ambiguous,
// its text kept), a steady one outlives the call's timeout.
func TestResponsesStreamDecidedBySilence(t *testing.T) {
	t.Parallel()
	c, _ := responsesClient(t, fakeprovider.Scenario{Script: []fakeprovider.Step{{Action: fakeprovider.ActionStallStream, Chunks: 2}}}, time.Minute)
	r := responsesRequest("r1", true)
	r.IdleTimeout = 200 * time.Millisecond
	res, err := c.Do(context.Background(), r)
	require.NoError(t, err)
	require.True(t, res.IdleTimedOut)
	require.Equal(t, classify.PhaseStream, res.Observation.Phase)
	require.Equal(t, fakeprovider.ExpectedAnswer(r.Prompt, true)[:24], res.Content)
	require.Equal(t, classify.Ambiguous, classify.Classify(res.Observation).Class)

	const chunkLatency = 60 * time.Millisecond
	c, _ = responsesClient(t, fakeprovider.Scenario{ChunkLatency: fakeprovider.Duration(chunkLatency)}, 300*time.Millisecond)
	r = responsesRequest("r2", true)
	r.IdleTimeout, r.StreamMax = time.Second, time.Minute
	start := time.Now()
	res, err = c.Do(context.Background(), r)
	require.NoError(t, err)
	require.Equal(t, classify.PhaseResponse, res.Observation.Phase, "not cut: %s", res.NetworkError)
	require.Equal(t, fakeprovider.ExpectedAnswer(r.Prompt, true), res.Content)
	require.Greater(t, time.Since(start), 300*time.Millisecond, "the stream lasted longer than the call timeout")
}

// TestResponsesRequestBody: what a record becomes on the wire.
func TestResponsesRequestBody(t *testing.T) {
	t.Parallel()
	temp := 0.5
	r := provider.Request{Model: "gpt-4o-mini", System: "Be brief.", Prompt: "Hello", MaxTokens: 100, Temperature: &temp,
		JSON: true, Schema: json.RawMessage(`{"type":"object"}`), SchemaName: "answer", SchemaStrict: true,
		RecordID: "r1", IdempotencyKey: "triage-k1"}
	b, err := provider.RequestBody(provider.FormatResponses, r)
	require.NoError(t, err)
	require.JSONEq(t, `{"model":"gpt-4o-mini","instructions":"Be brief.","input":"Hello","max_output_tokens":100,"temperature":0.5,
		"text":{"format":{"type":"json_schema","name":"answer","schema":{"type":"object"},"strict":true}},
		"store":false,"metadata":{"triage_idem":"triage-k1"}}`, string(b))

	r.Schema, r.SchemaName, r.Temperature, r.System = nil, "", nil, ""
	r.Store, r.Stream = true, true
	b, err = provider.RequestBody(provider.FormatResponses, r)
	require.NoError(t, err)
	require.JSONEq(t, `{"model":"gpt-4o-mini","input":"Hello","max_output_tokens":100,"text":{"format":{"type":"json_object"}},
		"stream":true,"store":true,"metadata":{"triage_idem":"triage-k1"}}`, string(b))

	r.Stream, r.Store, r.Background, r.JSON = false, false, true, false
	b, err = provider.RequestBody(provider.FormatResponses, r)
	require.NoError(t, err)
	require.JSONEq(t, `{"model":"gpt-4o-mini","input":"Hello","max_output_tokens":100,"background":true,"store":true,
		"metadata":{"triage_idem":"triage-k1"}}`, string(b), "background mode needs the response stored")

	_, err = provider.New(provider.Options{Vendor: "anthropic", Format: provider.FormatResponses, BaseURL: "https://x.test/v1", APIKey: "k"})
	require.ErrorIs(t, err, provider.ErrInvalidOptions)
	_, err = provider.New(provider.Options{Vendor: "groq", Format: provider.FormatResponses, BaseURL: "https://x.test/v1", APIKey: "k"})
	require.ErrorIs(t, err, provider.ErrInvalidOptions)
	_, err = provider.New(provider.Options{Vendor: "openai", Format: provider.FormatAnthropic, BaseURL: "https://x.test/v1", APIKey: "k"})
	require.ErrorIs(t, err, provider.ErrInvalidOptions)
}
