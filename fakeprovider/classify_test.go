package fakeprovider_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
)

// observe sends one request that the scenario answers with step and turns what
// came back into the Observation the worker would build.
func observe(t *testing.T, vendor string, step fakeprovider.Step, stream bool) classify.Observation {
	t.Helper()
	b := setup(t, fakeprovider.Scenario{Script: []fakeprovider.Step{step}})
	obs := classify.Observation{Vendor: vendor, Path: classify.PathDirect, Phase: classify.PhaseResponse}
	path := "/v1/chat/completions"
	if vendor == "anthropic" {
		path = "/v1/messages"
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	if step.Action == fakeprovider.ActionHang {
		go func() {
			_ = b.fp.WaitFor(ctx, func(st fakeprovider.Stats) bool { return st.Hanging == 1 })
			cancel() // the per-attempt timeout fires
		}()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+path, strings.NewReader(rawBody(vendor, "a", stream)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := b.http.Do(req)
	if err != nil {
		obs.Phase = classify.PhaseSentNoResponse
		return obs
	}
	defer resp.Body.Close()
	body, readErr := io.ReadAll(resp.Body)
	obs.Status = resp.StatusCode
	obs.Body = string(body)
	obs.Headers = map[string]string{}
	for k, v := range resp.Header {
		obs.Headers[strings.ToLower(k)] = v[0]
	}
	streamFailed := readErr != nil || (stream && !strings.Contains(obs.Body, "[DONE]") && !strings.Contains(obs.Body, "message_stop"))
	if resp.StatusCode/100 == 2 && stream && streamFailed {
		obs.Phase = classify.PhaseStream
	} else if readErr != nil {
		obs.Phase = classify.PhaseSentNoResponse
	}
	return obs
}

// Each scenario action must produce the class the design assigns it, for the
// bodies and headers the fake really sends.
func TestActionsClassify(t *testing.T) {
	t.Parallel()
	type c struct {
		action fakeprovider.Action
		stream bool
		class  classify.Class
	}
	common := []c{
		{fakeprovider.ActionOK, false, classify.OK},
		{fakeprovider.ActionOK, true, classify.OK},
		{fakeprovider.ActionRateLimit, false, classify.Throttled},
		{fakeprovider.ActionExhausted, false, classify.Exhausted},
		{fakeprovider.ActionOverloaded, false, classify.Transient},
		{fakeprovider.ActionServerError, false, classify.Transient},
		{fakeprovider.ActionUnauthorized, false, classify.Exhausted},
		{fakeprovider.ActionContextLength, false, classify.Rejected},
		{fakeprovider.ActionInvalidParam, false, classify.Rejected},
		{fakeprovider.ActionHang, false, classify.Ambiguous},
		{fakeprovider.ActionHang, true, classify.Ambiguous},
		{fakeprovider.ActionCutStream, true, classify.Ambiguous},
		{fakeprovider.ActionCutStream, false, classify.Ambiguous},
		{fakeprovider.ActionStreamError, true, classify.Ambiguous},
		// A 200 is OK to the classifier whatever its body; the worker's output
		// check is what must catch a garbage body (invalid_output).
		{fakeprovider.ActionGarbage, false, classify.OK},
	}
	cases := map[string][]c{
		"openai": append(common,
			c{fakeprovider.ActionTooLarge, false, classify.Rejected}, // waiting cannot shrink the request
			c{fakeprovider.ActionPolicy, false, classify.Rejected},
		),
		"anthropic": append(common,
			// Anthropic's body does not say the request is over the whole budget.
			c{fakeprovider.ActionTooLarge, false, classify.Throttled},
			// A refusal is a 200; the worker's output check dead-letters it.
			c{fakeprovider.ActionPolicy, false, classify.OK},
		),
	}
	for vendor, cs := range cases {
		for _, tc := range cs {
			name := vendor + "/" + string(tc.action)
			if tc.stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				obs := observe(t, vendor, fakeprovider.Step{Action: tc.action}, tc.stream)
				v := classify.Classify(obs)
				require.Equal(t, tc.class, v.Class, "observation %+v verdict %+v", obs, v)
				require.True(t, v.Known, "no default rule should be needed: %+v", v)
				if tc.class == classify.Throttled {
					require.NotNil(t, v.RetryAfterS, "the fake sends a retry hint")
				}
			})
		}
	}
}
