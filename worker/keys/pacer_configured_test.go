package keys

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/worker/provider"
)

// A key's rpm/tpm settings seed the pacer: it starts at them (less the
// headroom) instead of its slow start, a throttle lowers the share in use
// as under headers, a throttle at half the setting hands over to learning
// from throttles (the setting was wrong), and the provider's headers, once
// seen, replace the setting.
func TestControlConfiguredLimits(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name              string
		cfg               PacerConfig
		wantReq, wantToks float64
		wantSource        PaceSource
	}{
		{"unknown: slow start", PacerConfig{}, PacerInitialRateDefault, 0, PaceStarting},
		{"rpm", PacerConfig{KnownRate: 10}, 10 * PacerHeadroomDefault, 0, PaceConfigured},
		{"tpm only", PacerConfig{KnownTokens: 1000}, 0, 1000 * PacerHeadroomDefault, PaceConfigured},
		{"both", PacerConfig{KnownRate: 10, KnownTokens: 1000}, 10 * PacerHeadroomDefault, 1000 * PacerHeadroomDefault, PaceConfigured},
	} {
		c := newControl(tc.cfg, now)
		req, tok := c.fleetRates()
		require.Equal(t, tc.wantSource, c.source, tc.name)
		require.InDelta(t, tc.wantReq, req, 1e-9, tc.name)
		require.InDelta(t, tc.wantToks, tok, 1e-9, tc.name)
	}

	c := newControl(PacerConfig{KnownRate: 10}, now)
	c.tick(now.Add(time.Second), true, 9)
	req, _ := c.fleetRates()
	require.InDelta(t, 10*PacerHeadroomDefault, req, 1e-9, "no slow start above the setting")
	c.observe(PaceOutcome{At: now.Add(time.Second), Answered: true, Throttled: true})
	require.Equal(t, PaceConfigured, c.source)
	require.InDelta(t, PacerDecreaseDefault, c.factor, 1e-9, "a throttle lowers the share in use")
	for i := 1; i <= 100; i++ {
		c.tick(now.Add(time.Second+time.Duration(i)*100*time.Millisecond), true, 9)
	}
	require.InDelta(t, 1, c.factor, 1e-9, "calm brings it back")

	// A setting far over the real limit: throttled down to half of it,
	// then learned from throttles.
	at := now.Add(20 * time.Second)
	for c.source == PaceConfigured {
		at = at.Add(10 * time.Second)
		c.observe(PaceOutcome{At: at, Answered: true, Throttled: true})
		require.Less(t, at, now.Add(time.Hour), "hands over within a few throttles")
	}
	require.Equal(t, PaceThrottles, c.source)
	req, _ = c.fleetRates()
	require.Less(t, req, 5*PacerHeadroomDefault, "below half the setting")

	// Headers replace the setting.
	h := newControl(PacerConfig{KnownRate: 100}, now)
	h.observe(PaceOutcome{At: now, Answered: true, OK: true, RateLimit: provider.ParseRateLimit("openai",
		map[string]string{"x-ratelimit-limit-requests": "600", "x-ratelimit-remaining-requests": "599"}, now)})
	req, _ = h.fleetRates()
	require.Equal(t, PaceHeaders, h.source)
	require.InDelta(t, 10*PacerHeadroomDefault, req, 1e-9)
}

func TestPacerStateConfigured(t *testing.T) {
	t.Parallel()
	clk := &fakeNow{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := newPacer(PacerConfig{KnownRate: 5, KnownTokens: 500}, clk.now)
	st := p.State()
	require.Equal(t, PaceConfigured, st.Source)
	require.InDelta(t, 5*PacerHeadroomDefault, st.FleetRate, 1e-9)
	require.InDelta(t, 500*PacerHeadroomDefault, st.FleetTokens, 1e-9)
	require.InDelta(t, 5, st.ReqLimit, 1e-9)
}
