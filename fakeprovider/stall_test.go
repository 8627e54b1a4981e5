package fakeprovider_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// TestStallStream: the official SDKs' streams receive the first chunks of a
// stalled stream and then nothing: the server holds the connection (counted
// in hanging) until the client gives up; the call is billed once, for the
// chunks it generated.
func TestStallStream(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true, Script: []fakeprovider.Step{
		{Action: fakeprovider.ActionStallStream, Chunks: 2}, {Action: fakeprovider.ActionStallStream, Chunks: 2},
	}})
	for i, vendor := range vendors {
		ctx, cancel := context.WithCancel(ctxT(t))
		var got strings.Builder
		done := make(chan error, 1)
		chunks := make(chan struct{}, 64)
		go func() {
			if vendor == "openai" {
				s := b.openai.Chat.Completions.NewStreaming(ctx, oaParams("r"))
				for s.Next() {
					if ch := s.Current(); len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
						got.WriteString(ch.Choices[0].Delta.Content)
						chunks <- struct{}{}
					}
				}
				done <- s.Err()
				return
			}
			s := b.anth.Messages.NewStreaming(ctx, anParams("r"))
			for s.Next() {
				if ev := s.Current(); ev.Type == "content_block_delta" && ev.Delta.Text != "" {
					got.WriteString(ev.Delta.Text)
					chunks <- struct{}{}
				}
			}
			done <- s.Err()
		}()
		<-chunks
		<-chunks
		require.NoError(t, b.fp.WaitFor(ctx, func(st fakeprovider.Stats) bool { return st.Hanging == 1 }), vendor)
		cancel() // the client gives up
		require.Error(t, <-done, "%s: a stalled stream is no clean end", vendor)
		require.Equal(t, fakeprovider.ExpectedAnswer(prompt("r"), true)[:24], got.String(), vendor)
		require.NoError(t, b.fp.WaitFor(ctxT(t), func(st fakeprovider.Stats) bool { return st.Hanging == 0 }))
		require.Equal(t, i+1, b.fp.Stats().BilledCalls)
	}
	st := b.fp.Stats()
	require.Equal(t, 2*6, st.OutputTokens, "each billed for its two 12-character chunks (24 characters, 6 tokens), not the whole answer")
	require.Equal(t, 2, st.ByAction[fakeprovider.ActionStallStream])
}

// TestCutStreamBillsWhatItGenerated: a stream cut after n chunks bills its
// input and those chunks' output; a cut non-streaming body bills the whole
// answer, which was generated before it was sent.
func TestCutStreamBillsWhatItGenerated(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true, Script: []fakeprovider.Step{
		{Action: fakeprovider.ActionCutStream, Chunks: 1}, {Action: fakeprovider.ActionCutStream, Chunks: 1},
	}})
	ctx := ctxT(t)
	s := b.openai.Chat.Completions.NewStreaming(ctx, oaParams("r"))
	for s.Next() {
	}
	require.Error(t, s.Err())
	require.Equal(t, 3, b.fp.Stats().OutputTokens, "one 12-character chunk")
	_, err := b.openai.Chat.Completions.New(ctx, oaParams("r"))
	require.Error(t, err)
	whole := (len(fakeprovider.ExpectedAnswer(prompt("r"), true)) + 3) / 4
	require.Equal(t, 3+whole, b.fp.Stats().OutputTokens)
}
