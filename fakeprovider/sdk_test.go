package fakeprovider_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

func TestOpenAISuccess(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	ctx := ctxT(t)

	res, err := b.openai.Chat.Completions.New(ctx, oaParams("rec-1"))
	require.NoError(t, err)
	require.Len(t, res.Choices, 1)
	want := fakeprovider.ExpectedAnswer(prompt("rec-1"), true)
	require.Equal(t, want, res.Choices[0].Message.Content)
	require.Equal(t, "stop", res.Choices[0].FinishReason)
	require.Equal(t, "chat.completion", string(res.Object))
	require.Positive(t, res.Usage.PromptTokens)
	require.Positive(t, res.Usage.CompletionTokens)
	require.Equal(t, res.Usage.PromptTokens+res.Usage.CompletionTokens, res.Usage.TotalTokens)

	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.Choices[0].Message.Content), &obj), "JSON was asked for")
	require.Equal(t, "rec-1", obj["id"], "the record id is echoed")

	other, err := b.openai.Chat.Completions.New(ctx, oaParams("rec-2"))
	require.NoError(t, err)
	require.NotEqual(t, res.Choices[0].Message.Content, other.Choices[0].Message.Content, "each record gets its own answer")
	require.NotEqual(t, res.ID, other.ID)

	st := b.fp.Stats()
	require.Equal(t, 2, st.BilledCalls)
	require.Equal(t, 2, st.ByStatus[200])
	require.Equal(t, int(res.Usage.PromptTokens+other.Usage.PromptTokens), st.InputTokens)
}

func TestOpenAITextAnswerWithoutJSONSystem(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	res, err := b.openai.Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT4oMini,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})
	require.NoError(t, err)
	require.Equal(t, fakeprovider.ExpectedAnswer("hello", false), res.Choices[0].Message.Content)
	require.False(t, json.Valid([]byte(res.Choices[0].Message.Content)))
}

func TestOpenAIStream(t *testing.T) {
	t.Parallel()
	for _, includeUsage := range []bool{false, true} {
		b := setup(t, fakeprovider.Scenario{})
		ctx := ctxT(t)
		p := oaParams("rec-s")
		if includeUsage {
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
		stream := b.openai.Chat.Completions.NewStreaming(ctx, p)
		acc := openai.ChatCompletionAccumulator{}
		n := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			n++
		}
		require.NoError(t, stream.Err())
		require.NoError(t, stream.Close())
		require.Greater(t, n, 3, "the answer comes in several chunks")
		require.Equal(t, fakeprovider.ExpectedAnswer(prompt("rec-s"), true), acc.Choices[0].Message.Content)
		require.Equal(t, "stop", acc.Choices[0].FinishReason)
		if includeUsage {
			require.Positive(t, acc.Usage.PromptTokens)
			require.Positive(t, acc.Usage.CompletionTokens)
		} else {
			require.Zero(t, acc.Usage.TotalTokens)
		}
		require.Equal(t, 1, b.fp.Stats().BilledCalls)
	}
}

func TestAnthropicSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	msg, err := b.anth.Messages.New(ctxT(t), anParams("rec-1"))
	require.NoError(t, err)
	require.Len(t, msg.Content, 1)
	require.Equal(t, fakeprovider.ExpectedAnswer(prompt("rec-1"), true), msg.Content[0].Text)
	require.Equal(t, anthropic.StopReasonEndTurn, msg.StopReason)
	require.Positive(t, msg.Usage.InputTokens)
	require.Positive(t, msg.Usage.OutputTokens)
	require.Contains(t, msg.ID, "msg_01")
}

func TestAnthropicStream(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	stream := b.anth.Messages.NewStreaming(ctxT(t), anParams("rec-s"))
	var msg anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		require.NoError(t, msg.Accumulate(ev))
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	require.Equal(t, "message_start", types[0])
	require.Equal(t, "message_stop", types[len(types)-1])
	require.Contains(t, types, "content_block_delta")
	require.Contains(t, types, "message_delta")
	require.Equal(t, fakeprovider.ExpectedAnswer(prompt("rec-s"), true), msg.Content[0].Text)
	require.Equal(t, anthropic.StopReasonEndTurn, msg.StopReason)
	require.Positive(t, msg.Usage.OutputTokens)
}

// Every error action must decode into the SDK's error type with the vendor's
// own status, type and code: that is what the worker's classifier will see.
func TestOpenAIErrorsDecode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		step   fakeprovider.Step
		status int
		typ    string
		code   string
		param  string
	}{
		{fakeprovider.Step{Status: 429}, 429, "requests", "rate_limit_exceeded", ""},
		{fakeprovider.Step{Action: fakeprovider.ActionTooLarge}, 429, "tokens", "rate_limit_exceeded", ""},
		{fakeprovider.Step{Action: fakeprovider.ActionExhausted}, 429, "insufficient_quota", "insufficient_quota", ""},
		{fakeprovider.Step{Status: 503}, 503, "server_error", "", ""},
		{fakeprovider.Step{Status: 500}, 500, "server_error", "", ""},
		{fakeprovider.Step{Status: 401}, 401, "invalid_request_error", "invalid_api_key", ""},
		{fakeprovider.Step{Action: fakeprovider.ActionContextLength}, 400, "invalid_request_error", "context_length_exceeded", "messages"},
		{fakeprovider.Step{Action: fakeprovider.ActionInvalidParam}, 400, "invalid_request_error", "integer_below_min_value", "max_tokens"},
		{fakeprovider.Step{Action: fakeprovider.ActionPolicy}, 400, "invalid_request_error", "invalid_prompt", ""},
		{fakeprovider.Step{Action: fakeprovider.ActionOverloaded, Status: 502}, 502, "server_error", "", ""},
	}
	steps := make([]fakeprovider.Step, len(cases))
	for i, c := range cases {
		steps[i] = c.step
	}
	b := setup(t, fakeprovider.Scenario{Script: steps})
	for _, c := range cases {
		_, err := b.openai.Chat.Completions.New(ctxT(t), oaParams("rec"))
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr, "%+v", c.step)
		require.Equal(t, c.status, apiErr.StatusCode, "%+v", c.step)
		require.Equal(t, c.typ, apiErr.Type, "%+v", c.step)
		require.Equal(t, c.code, apiErr.Code, "%+v", c.step)
		require.Equal(t, c.param, apiErr.Param, "%+v", c.step)
		require.NotEmpty(t, apiErr.Message)
		require.NotEmpty(t, apiErr.Response.Header.Get("x-request-id"))
	}
	st := b.fp.Stats()
	require.Zero(t, st.BilledCalls, "errors are not billed")
	require.Equal(t, len(cases), st.Requests)
}

func TestAnthropicErrorsDecode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		step   fakeprovider.Step
		status int
		typ    string
		msg    string
	}{
		{fakeprovider.Step{Status: 429}, 429, "rate_limit_error", "would exceed the rate limit"},
		{fakeprovider.Step{Action: fakeprovider.ActionExhausted}, 400, "invalid_request_error", "credit balance is too low"},
		{fakeprovider.Step{Action: fakeprovider.ActionOverloaded}, 529, "overloaded_error", "Overloaded"},
		{fakeprovider.Step{Status: 500}, 500, "api_error", "Internal server error"},
		{fakeprovider.Step{Status: 401}, 401, "authentication_error", "invalid x-api-key"},
		{fakeprovider.Step{Action: fakeprovider.ActionContextLength}, 400, "invalid_request_error", "prompt is too long"},
		{fakeprovider.Step{Action: fakeprovider.ActionInvalidParam}, 400, "invalid_request_error", "max_tokens"},
		{fakeprovider.Step{Status: 503}, 503, "overloaded_error", "Overloaded"},
	}
	steps := make([]fakeprovider.Step, len(cases))
	for i, c := range cases {
		steps[i] = c.step
	}
	b := setup(t, fakeprovider.Scenario{Script: steps})
	for _, c := range cases {
		_, err := b.anth.Messages.New(ctxT(t), anParams("rec"))
		var apiErr *anthropic.Error
		require.ErrorAs(t, err, &apiErr, "%+v", c.step)
		require.Equal(t, c.status, apiErr.StatusCode, "%+v", c.step)
		require.Equal(t, c.typ, string(apiErr.Type()), "%+v", c.step)
		require.Contains(t, apiErr.Message, c.msg)
		require.NotEmpty(t, apiErr.RequestID, "request-id header")
	}
}

func TestAnthropicPolicyIsARefusal(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{PolicyMarker: "BLOCKME"}})
	p := anParams("x")
	p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("please BLOCKME"))}
	msg, err := b.anth.Messages.New(ctxT(t), p)
	require.NoError(t, err)
	require.Equal(t, anthropic.StopReasonRefusal, msg.StopReason)
	require.Empty(t, msg.Content)

	stream := b.anth.Messages.NewStreaming(ctxT(t), p)
	var acc anthropic.Message
	for stream.Next() {
		require.NoError(t, acc.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.Equal(t, anthropic.StopReasonRefusal, acc.StopReason)
	require.Equal(t, 2, b.fp.Stats().BilledCalls, "Anthropic bills refusals")
}

func TestMidStreamErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Script: []fakeprovider.Step{
		{Action: fakeprovider.ActionStreamError, Chunks: 1},
		{Action: fakeprovider.ActionStreamError, Chunks: 1},
	}})

	os := b.openai.Chat.Completions.NewStreaming(ctxT(t), oaParams("r"))
	n := 0
	for os.Next() {
		n++
	}
	require.Equal(t, 2, n, "the role chunk and one content chunk arrive first")
	require.ErrorContains(t, os.Err(), "received error while streaming")
	require.ErrorContains(t, os.Err(), "server_error")

	as := b.anth.Messages.NewStreaming(ctxT(t), anParams("r"))
	for as.Next() {
	}
	var apiErr *anthropic.Error
	require.ErrorAs(t, as.Err(), &apiErr)
	require.Equal(t, "overloaded_error", string(apiErr.Type()))

	st := b.fp.Stats()
	require.Equal(t, 2, st.BilledCalls, "a stream that failed midway ran and is billed")
	require.Equal(t, 2, st.ByStatus[200])
}

func TestCutStreamAndGarbage(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Script: acts("cut_stream", "cut_stream", "cut_stream", "cut_stream", "garbage", "garbage")})
	ctx := ctxT(t)

	os := b.openai.Chat.Completions.NewStreaming(ctx, oaParams("r"))
	for os.Next() {
	}
	require.Error(t, os.Err(), "a cut stream is not a clean end")

	as := b.anth.Messages.NewStreaming(ctx, anParams("r"))
	for as.Next() {
	}
	require.Error(t, as.Err())

	_, err := b.openai.Chat.Completions.New(ctx, oaParams("r"))
	require.Error(t, err, "a half body does not decode")
	_, err = b.anth.Messages.New(ctx, anParams("r"))
	require.Error(t, err)

	_, err = b.openai.Chat.Completions.New(ctx, oaParams("r"))
	require.Error(t, err, "a non-JSON 200 does not decode")
	var apiErr *openai.Error
	require.False(t, errors.As(err, &apiErr), "it is not an API error either")
	_, err = b.anth.Messages.New(ctx, anParams("r"))
	require.Error(t, err)

	st := b.fp.Stats()
	require.Equal(t, 6, st.BilledCalls)
	require.Equal(t, 6, st.ByStatus[200])
}
