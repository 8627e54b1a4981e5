package provider_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/provider"
)

const fakeKey = "sk-fake-SECRET-42"

// TestAgainstFakeProvider runs a scripted sequence through the team's fake
// provider in both wire formats, streaming and not, and checks the phase,
// the classifier's verdict and the fake's books.
func TestAgainstFakeProvider(t *testing.T) {
	t.Parallel()
	for _, vendor := range []string{"openai", "anthropic"} {
		for _, stream := range []bool{false, true} {
			name := vendor
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				fp := fakeprovider.New(fakeprovider.Scenario{
					APIKey: fakeKey,
					Script: []fakeprovider.Step{
						{Action: fakeprovider.ActionOK},
						{Action: fakeprovider.ActionRateLimit},
						{Action: fakeprovider.ActionExhausted},
						{Action: fakeprovider.ActionHang},
						{Action: fakeprovider.ActionOK}, // not reached: the retry is replayed
						{Action: fakeprovider.ActionCutStream},
						{Action: fakeprovider.ActionGarbage},
					},
				})
				srv := httptest.NewServer(fp)
				t.Cleanup(srv.Close)
				t.Cleanup(func() { _ = fp.Close() })

				c, err := provider.New(provider.Options{Vendor: vendor, BaseURL: srv.URL + "/v1", APIKey: fakeKey, Timeout: 300 * time.Millisecond})
				require.NoError(t, err)

				mk := func(id string) provider.Request {
					r := provider.Request{
						Model: "m", System: "Answer with one JSON object.", Prompt: `Record: {"id":"` + id + `"}`,
						MaxTokens: 64, JSON: true, Stream: stream, RecordID: id,
					}
					r.IdempotencyKey = provider.IdempotencyKey("b", id, "enrich", provider.RequestHash(r))
					return r
				}
				do := func(r provider.Request) (provider.Result, classify.Verdict) {
					res, err := c.Do(context.Background(), r)
					require.NoError(t, err)
					return res, classify.Classify(res.Observation)
				}

				res, v := do(mk("r1"))
				require.Equal(t, classify.OK, v.Class, res.Observation.Body)
				require.Equal(t, fakeprovider.ExpectedAnswer(mk("r1").Prompt, true), res.Content)
				require.Positive(t, res.InputTokens)
				require.Positive(t, res.OutputTokens)

				res, v = do(mk("r2"))
				require.Equal(t, classify.PhaseResponse, res.Observation.Phase)
				require.Equal(t, classify.Throttled, v.Class)

				_, v = do(mk("r3"))
				require.Equal(t, classify.Exhausted, v.Class)

				// The fake bills, then hangs: ambiguous; the retry with the same
				// idempotency key gets the stored answer, not a second bill.
				res, v = do(mk("r4"))
				require.Equal(t, classify.PhaseSentNoResponse, res.Observation.Phase)
				require.Equal(t, classify.Ambiguous, v.Class)
				res, v = do(mk("r4"))
				require.Equal(t, classify.OK, v.Class)
				require.Equal(t, fakeprovider.ExpectedAnswer(mk("r4").Prompt, true), res.Content)

				res, v = do(mk("r5"))
				if stream {
					require.Equal(t, classify.PhaseStream, res.Observation.Phase)
				} else {
					require.Equal(t, classify.PhaseSentNoResponse, res.Observation.Phase)
				}
				require.Equal(t, classify.Ambiguous, v.Class)

				// A garbage 200 (a misbehaving proxy) is classified ok; Malformed
				// tells the worker the output is unusable (invalid_output).
				res, v = do(mk("r6"))
				require.Equal(t, classify.PhaseResponse, res.Observation.Phase)
				require.Equal(t, classify.OK, v.Class)
				require.Equal(t, "2xx body is not JSON", res.Malformed)
				require.Empty(t, res.Content)

				st := fp.Stats()
				require.Zero(t, st.DoubleBilledRecords)
				require.Equal(t, 1, st.IdempotentReplays)
			})
		}
	}
}
