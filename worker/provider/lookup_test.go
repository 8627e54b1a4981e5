package provider_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/provider"
)

// A stored call whose answer was lost (the provider billed it and hung) is
// found by its idempotency key, with the answer and usage it was billed for;
// another key finds nothing; Anthropic has no look-up.
func TestLookupFindsAStoredCallAfterALostAnswer(t *testing.T) {
	t.Parallel()
	fp := fakeprovider.New(fakeprovider.Scenario{APIKey: fakeKey, NoReplay: true,
		Script: []fakeprovider.Step{{Action: fakeprovider.ActionHang}}})
	srv := httptest.NewServer(fp)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = fp.Close() })
	c, err := provider.New(provider.Options{Vendor: "openai", BaseURL: srv.URL + "/v1", APIKey: fakeKey, Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	ctx := context.Background()
	req := provider.Request{Model: "gpt-4o-mini", Prompt: `Record: {"id":"r1"}`, MaxTokens: 64, IdempotencyKey: "idem-r1", RecordID: "r1", Store: true}

	res, err := c.Do(ctx, req)
	require.NoError(t, err)
	require.Equal(t, classify.PhaseSentNoResponse, res.Observation.Phase, "the answer was lost")

	found, n, err := c.Lookup(ctx, "idem-r1")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, fakeprovider.ExpectedAnswer(req.Prompt, false), found.Content)
	require.Positive(t, found.InputTokens)
	require.Positive(t, found.OutputTokens)
	st := fp.Stats()
	require.Equal(t, 1, st.BilledCalls)
	require.InDelta(t, st.BilledUSD, float64(found.InputTokens)*fakeprovider.InputUSDPerMTokDefault/1e6+
		float64(found.OutputTokens)*fakeprovider.OutputUSDPerMTokDefault/1e6, 1e-12, "the stored usage is what was billed")

	_, n, err = c.Lookup(ctx, "idem-other")
	require.NoError(t, err)
	require.Zero(t, n)

	a, err := provider.New(provider.Options{Vendor: "anthropic", BaseURL: srv.URL + "/v1", APIKey: fakeKey})
	require.NoError(t, err)
	_, _, err = a.Lookup(ctx, "idem-r1")
	require.True(t, errors.Is(err, provider.ErrNoLookup))
}
