package jobrun

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/provider"
)

// TestKeepPartial: a cut stream is priced at what arrived (estimated where
// the stream did not say), and the rest of its estimate stays possibly
// billed; billed plus possibly billed is the estimate.
func TestKeepPartial(t *testing.T) {
	t.Parallel()
	m := &config.Model{Name: "m", InputUSDPerMTok: 1, OutputUSDPerMTok: 2}
	c := &call{model: m, req: provider.Request{System: "ssss", Prompt: "pppppppp", MaxTokens: 100}}
	c.res.Observation.Phase = classify.PhaseStream
	c.res.Content = "héllo wörld" // 11 characters, 13 bytes
	require.Equal(t, 11, c.keepPartial())
	require.Equal(t, 3, c.res.InputTokens)
	require.Equal(t, 4, c.res.OutputTokens)
	require.Equal(t, "héllo wörld", c.partial.Text)
	received := cost(m, 3, 4)
	require.InDelta(t, estimateCost(m, c.req)-received, c.partial.RestEstimateUSD, 1e-12)

	// Usage the stream did report (Anthropic's message_start) is kept.
	c2 := &call{model: m, req: c.req}
	c2.res.Observation.Phase = classify.PhaseStream
	c2.res.InputTokens = 40
	require.Zero(t, c2.keepPartial())
	require.Equal(t, 40, c2.res.InputTokens)
	require.Zero(t, c2.res.OutputTokens)
	require.NotNil(t, c2.partial, "a stream that started is kept even with no text")

	// A whole answer is not a partial.
	c3 := &call{model: m, req: c.req}
	c3.res.Observation.Phase = classify.PhaseResponse
	c3.res.Content = "done"
	require.Zero(t, c3.keepPartial())
	require.Nil(t, c3.partial)
}
