package fakeprovider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

func TestRateLimitOnInjectedClock(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{RateLimit: &fakeprovider.RateLimit{RequestsPerMinute: 2, TokensPerMinute: 10000}})
	ctx := ctxT(t)
	for range 2 {
		r, err := b.post(t, ctx, "openai", rawBody("openai", "a", false), nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.status)
		require.Equal(t, "2", r.header.Get("x-ratelimit-limit-requests"))
	}
	_, err := b.openai.Chat.Completions.New(ctx, oaParams("a"))
	var oe *openai.Error
	require.ErrorAs(t, err, &oe)
	require.Equal(t, 429, oe.StatusCode)
	require.Equal(t, "requests", oe.Type)
	require.Equal(t, "rate_limit_exceeded", oe.Code)
	require.Contains(t, oe.Message, "on requests per min (RPM): Limit 2, Used 2, Requested 1. Please try again in 30s.")
	require.Equal(t, "30", oe.Response.Header.Get("retry-after"), "a request comes back every 30 s at 2 RPM")
	require.Equal(t, "30000", oe.Response.Header.Get("retry-after-ms"))
	require.Equal(t, "0", oe.Response.Header.Get("x-ratelimit-remaining-requests"))

	_, err = b.anth.Messages.New(ctx, anParams("a"))
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 429, ae.StatusCode)
	require.Equal(t, "rate_limit_error", string(ae.Type()))
	require.Equal(t, "30", ae.Response.Header.Get("retry-after"))
	require.Equal(t, "0", ae.Response.Header.Get("anthropic-ratelimit-requests-remaining"))
	require.Equal(t, "2026-03-01T12:01:00Z", ae.Response.Header.Get("anthropic-ratelimit-requests-reset"))

	b.clock.Advance(30 * time.Second)
	_, err = b.anth.Messages.New(ctx, anParams("a"))
	require.NoError(t, err, "the bucket refilled one request")
	_, err = b.openai.Chat.Completions.New(ctx, oaParams("a"))
	require.Error(t, err, "but only one")
}

func TestTokenLimitAndTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{RateLimit: &fakeprovider.RateLimit{TokensPerMinute: 60}})
	ctx := ctxT(t)
	_, err := b.openai.Chat.Completions.New(ctx, oaParams("a"))
	require.NoError(t, err)
	_, err = b.openai.Chat.Completions.New(ctx, oaParams("a"))
	var oe *openai.Error
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "tokens", oe.Type, "the token bucket is the one that ran dry")
	require.NotEmpty(t, oe.Response.Header.Get("retry-after"))

	p := oaParams("a")
	p.Messages = append(p.Messages, openai.UserMessage(strings.Repeat("long ", 100)))
	_, err = b.openai.Chat.Completions.New(ctx, p)
	require.ErrorAs(t, err, &oe)
	require.Equal(t, 429, oe.StatusCode)
	require.Contains(t, oe.Message, "Request too large")
	require.Empty(t, oe.Response.Header.Get("retry-after"), "waiting cannot help")
}

func TestBalanceRunsOutAndTopUp(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{
		Balance: &fakeprovider.Balance{USD: 0.00001},
		Price:   fakeprovider.Price{InputUSDPerMTok: 1, OutputUSDPerMTok: 1},
	})
	ctx := ctxT(t)
	_, err := b.openai.Chat.Completions.New(ctx, oaParams("a"))
	require.NoError(t, err, "the last cents pay for one call")

	_, err = b.openai.Chat.Completions.New(ctx, oaParams("b"))
	var oe *openai.Error
	require.ErrorAs(t, err, &oe)
	require.Equal(t, 429, oe.StatusCode)
	require.Equal(t, "insufficient_quota", oe.Code)

	_, err = b.anth.Messages.New(ctx, anParams("b"))
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 400, ae.StatusCode)
	require.Contains(t, ae.Message, "credit balance is too low")

	st := b.fp.Stats()
	require.Equal(t, 2, st.RequestsWhileExhausted)
	require.Equal(t, 1, st.BilledCalls)
	require.Less(t, *st.BalanceUSD, 0.0)
	require.InDelta(t, 0.00001-st.BilledUSD, *st.BalanceUSD, 1e-12)

	b.fp.TopUp(1)
	_, err = b.anth.Messages.New(ctx, anParams("b"))
	require.NoError(t, err, "a top-up ends the exhaustion")
	require.Equal(t, 2, b.fp.Stats().RequestsWhileExhausted)
}

func TestOutageWindows(t *testing.T) {
	t.Parallel()
	t.Run("by request count", func(t *testing.T) {
		t.Parallel()
		b := setup(t, fakeprovider.Scenario{Outages: []fakeprovider.Outage{{FromRequest: 2, Requests: 2}}})
		var got []int
		for _, v := range []string{"openai", "openai", "anthropic", "anthropic"} {
			r, err := b.post(t, ctxT(t), v, rawBody(v, "a", false), nil)
			require.NoError(t, err)
			got = append(got, r.status)
		}
		require.Equal(t, []int{200, 503, 529, 200}, got)
	})
	t.Run("by time", func(t *testing.T) {
		t.Parallel()
		b := setup(t, fakeprovider.Scenario{Outages: []fakeprovider.Outage{{
			After: fakeprovider.Duration(10 * time.Second), For: fakeprovider.Duration(20 * time.Second), Action: fakeprovider.ActionServerError,
		}}})
		status := func() int {
			r, err := b.post(t, ctxT(t), "openai", rawBody("openai", "a", false), nil)
			require.NoError(t, err)
			return r.status
		}
		require.Equal(t, 200, status())
		b.clock.Advance(10 * time.Second)
		require.Equal(t, 500, status())
		b.clock.Advance(19 * time.Second)
		require.Equal(t, 500, status())
		b.clock.Advance(time.Second)
		require.Equal(t, 200, status())
	})
}

func TestPoison(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{ContextTokens: 100, InvalidMarker: "%%BAD%%", PolicyMarker: "%%POLICY%%"}})
	ctx := ctxT(t)
	with := func(text string) openai.ChatCompletionNewParams {
		p := oaParams("a")
		p.Messages = append(p.Messages, openai.UserMessage(text))
		return p
	}
	for text, code := range map[string]string{
		strings.Repeat("word ", 200): "context_length_exceeded",
		"this is %%BAD%%":            "integer_below_min_value",
		"this is %%POLICY%%":         "invalid_prompt",
	} {
		_, err := b.openai.Chat.Completions.New(ctx, with(text))
		var oe *openai.Error
		require.ErrorAs(t, err, &oe)
		require.Equal(t, 400, oe.StatusCode)
		require.Equal(t, code, oe.Code)
	}
	_, err := b.openai.Chat.Completions.New(ctx, with("fine"))
	require.NoError(t, err)

	p := anParams("a")
	p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(strings.Repeat("word ", 200)))}
	_, err = b.anth.Messages.New(ctx, p)
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	require.Regexp(t, `^prompt is too long: \d+ tokens > 100 maximum$`, ae.Message)

	st := b.fp.Stats()
	require.Equal(t, 1, st.BilledCalls, "rejected requests cost nothing")
}

func TestRecordScriptsAndGlobalScript(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{
		Script:        []fakeprovider.Step{{Status: 500}},
		RecordScripts: map[string][]fakeprovider.Step{"r1": {{Status: 429}, {Status: 503}}},
	})
	do := func(rec string) int {
		r, err := b.post(t, ctxT(t), "openai", rawBody("openai", rec, false), map[string]string{fakeprovider.RecordHeader: rec})
		require.NoError(t, err)
		return r.status
	}
	require.Equal(t, 429, do("r1"), "the record's script wins over the global one")
	require.Equal(t, 200, do("r2"), "the global script's only step went to request 1")
	require.Equal(t, 503, do("r1"))
	require.Equal(t, 200, do("r1"))
	st := b.fp.Stats()
	require.Equal(t, []int{429, 503, 200}, st.ByRecord["r1"].Statuses)
	require.Equal(t, []fakeprovider.Action{"rate_limit", "overloaded", "ok"}, st.ByRecord["r1"].Actions)
}

func TestRecordIsMessagesHashWithoutHeader(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	for range 2 {
		_, err := b.openai.Chat.Completions.New(ctxT(t), oaParams("same"))
		require.NoError(t, err)
	}
	st := b.fp.Stats()
	require.Len(t, st.ByRecord, 1)
	for id, rs := range st.ByRecord {
		require.True(t, strings.HasPrefix(id, "sha256:"))
		require.Equal(t, 2, rs.Billed)
	}
	require.Equal(t, 1, st.DoubleBilledRecords, "the same call without a key is billed twice")
}

func TestHangThenIdempotentRetry(t *testing.T) {
	t.Parallel()
	for _, v := range vendors {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeprovider.Scenario{RecordScripts: map[string][]fakeprovider.Step{"r1": acts("hang")}})
			hdr := map[string]string{fakeprovider.RecordHeader: "r1", fakeprovider.IdempotencyHeader: "key-1"}

			ctx, cancel := context.WithCancel(ctxT(t))
			errc := make(chan error, 1)
			go func() {
				_, err := b.post(t, ctx, v, rawBody(v, "r1", false), hdr)
				errc <- err
			}()
			require.NoError(t, b.fp.WaitFor(ctxT(t), func(st fakeprovider.Stats) bool { return st.Hanging == 1 }))
			require.Equal(t, 1, b.fp.Stats().BilledCalls, "the hung call was billed")
			cancel() // the worker's per-attempt timeout
			require.ErrorIs(t, <-errc, context.Canceled)

			r, err := b.post(t, ctxT(t), v, rawBody(v, "r1", false), hdr)
			require.NoError(t, err)
			require.Equal(t, 200, r.status)
			require.Contains(t, r.body, `\"id\":\"r1\"`, "the stored answer comes back")

			st := b.fp.Stats()
			require.Equal(t, 1, st.BilledCalls)
			require.Equal(t, 1, st.IdempotentReplays)
			require.Zero(t, st.DoubleBilledRecords)
			require.Equal(t, []string{"key-1", "key-1"}, st.ByRecord["r1"].IdempotencyKeys)
			require.Equal(t, []int{0, 200}, st.ByRecord["r1"].Statuses, "0: no status line")

			delete(hdr, fakeprovider.IdempotencyHeader)
			r, err = b.post(t, ctxT(t), v, rawBody(v, "r1", true), hdr)
			require.NoError(t, err)
			require.Equal(t, 200, r.status)
			st = b.fp.Stats()
			require.Equal(t, 2, st.BilledCalls, "without the key the retry is billed again")
			require.Equal(t, 1, st.DoubleBilledRecords)
		})
	}
}

// With replay off, as at real providers, a repeated Idempotency-Key runs and
// bills the request again.
func TestNoReplayBillsARepeatedKeyAgain(t *testing.T) {
	t.Parallel()
	for _, v := range vendors {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeprovider.Scenario{NoReplay: true})
			hdr := map[string]string{fakeprovider.RecordHeader: "r1", fakeprovider.IdempotencyHeader: "key-1"}
			for range 2 {
				r, err := b.post(t, ctxT(t), v, rawBody(v, "r1", false), hdr)
				require.NoError(t, err)
				require.Equal(t, 200, r.status)
			}
			st := b.fp.Stats()
			require.Equal(t, 2, st.BilledCalls)
			require.Zero(t, st.IdempotentReplays)
			require.Equal(t, 1, st.DoubleBilledRecords)
		})
	}
}

// A model with a generation time keeps generating after the client gives
// up, and bills the call when it is done; a client that waits gets the
// answer.
func TestGenerationBillsAfterTheClientGivesUp(t *testing.T) {
	t.Parallel()
	for _, v := range vendors {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeprovider.Scenario{NoReplay: true, GenerationTime: fakeprovider.Duration(300 * time.Millisecond)})
			hdr := map[string]string{fakeprovider.RecordHeader: "r1"}
			ctx, cancel := context.WithCancel(ctxT(t))
			errc := make(chan error, 1)
			go func() {
				_, err := b.post(t, ctx, v, rawBody(v, "r1", false), hdr)
				errc <- err
			}()
			require.NoError(t, b.fp.WaitFor(ctxT(t), func(st fakeprovider.Stats) bool { return st.InFlight == 1 }))
			require.Zero(t, b.fp.Stats().BilledCalls, "not billed before generation ends")
			cancel() // the client gives up
			require.ErrorIs(t, <-errc, context.Canceled)
			require.NoError(t, b.fp.WaitFor(ctxT(t), func(st fakeprovider.Stats) bool { return st.BilledAfterClientLeft == 1 }))
			require.Equal(t, 1, b.fp.Stats().BilledCalls, "billed although nobody read the answer")

			r, err := b.post(t, ctxT(t), v, rawBody(v, "r1", false), hdr)
			require.NoError(t, err)
			require.Equal(t, 200, r.status, "a client that waits gets the answer")
			require.Equal(t, 2, b.fp.Stats().BilledCalls)
		})
	}
}

func TestCloseReleasesHungRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Script: acts("hang", "hang")})
	errc := make(chan error, 2)
	for _, v := range vendors {
		go func() {
			_, err := b.post(t, context.Background(), v, rawBody(v, "r", true), nil)
			errc <- err
		}()
	}
	require.NoError(t, b.fp.WaitFor(ctxT(t), func(st fakeprovider.Stats) bool { return st.Hanging == 2 }))
	require.NoError(t, b.fp.Close())
	for range vendors {
		require.Error(t, <-errc, "the connection is dropped, not answered")
	}
	require.NoError(t, b.fp.WaitFor(ctxT(t), func(st fakeprovider.Stats) bool { return st.InFlight == 0 }))
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	ctx := ctxT(t)

	r, err := b.post(t, ctx, "openai", rawBody("openai", "a", false), map[string]string{"Authorization": "Bearer sk-wrong-key-0000000000000000000000WXYZ"})
	require.NoError(t, err)
	require.Equal(t, 401, r.status)
	require.Regexp(t, `Incorrect API key provided: sk-wrong\*+WXYZ\. `, r.body, "masked as the API masks it")
	require.Contains(t, r.body, `"code": "invalid_api_key"`)

	r, err = b.post(t, ctx, "openai", rawBody("openai", "a", false), map[string]string{"Authorization": ""})
	require.NoError(t, err)
	require.Equal(t, 401, r.status)
	require.Contains(t, r.body, "You didn't provide an API key.")

	r, err = b.post(t, ctx, "anthropic", rawBody("anthropic", "a", false), map[string]string{"x-api-key": "wrong"})
	require.NoError(t, err)
	require.Equal(t, 401, r.status)
	require.Contains(t, r.body, `"invalid x-api-key"`)

	r, err = b.post(t, ctx, "anthropic", rawBody("anthropic", "a", false), map[string]string{"anthropic-version": ""})
	require.NoError(t, err)
	require.Equal(t, 400, r.status)
	require.Contains(t, r.body, "anthropic-version: header is required")

	r, err = b.post(t, ctx, "anthropic", `{"model":"m","messages":[]}`, nil)
	require.NoError(t, err)
	require.Equal(t, 400, r.status)
	require.Contains(t, r.body, "max_tokens: Field required")

	r, err = b.post(t, ctx, "openai", `{not json`, nil)
	require.NoError(t, err)
	require.Equal(t, 400, r.status)
	require.Contains(t, r.body, "We could not parse the JSON body of your request.")

	st := b.fp.Stats()
	require.Equal(t, 6, st.Requests)
	require.Equal(t, 3, st.ByStatus[401])
	require.Zero(t, st.BilledCalls)
}

func TestControlEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}})
	ctx := ctxT(t)
	call := func(method, path, body string) (int, fakeprovider.Stats) {
		req, err := http.NewRequestWithContext(ctx, method, b.srv.URL+path, bytes.NewBufferString(body))
		require.NoError(t, err)
		resp, err := b.http.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var st fakeprovider.Stats
		if resp.StatusCode == 200 {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
		}
		return resp.StatusCode, st
	}

	r, err := b.post(t, ctx, "openai", rawBody("openai", "a", false), nil)
	require.NoError(t, err)
	require.Equal(t, 429, r.status, "a zero balance is exhausted")

	code, st := call("POST", "/__topup", `{"usd": 5}`)
	require.Equal(t, 200, code)
	require.InDelta(t, 5.0, *st.BalanceUSD, 1e-9)

	code, _ = call("POST", "/__set", `{"script": [503], "bogus": 1}`)
	require.Equal(t, 400, code, "unknown fields are refused")
	code, _ = call("POST", "/__set", `{"script": [503]}`)
	require.Equal(t, 200, code)
	r, err = b.post(t, ctx, "openai", rawBody("openai", "a", false), nil)
	require.NoError(t, err)
	require.Equal(t, 503, r.status)
	r, err = b.post(t, ctx, "openai", rawBody("openai", "a", false), nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.status, "the new scenario has no balance limit")

	code, st = call("GET", "/__stats?min_requests=3", "")
	require.Equal(t, 200, code)
	require.Equal(t, 3, st.Requests)
	require.Equal(t, map[int]int{429: 1, 503: 1, 200: 1}, st.ByStatus)
	require.Equal(t, 1, st.BilledCalls)
	require.Equal(t, 1, st.PeakInFlight)

	code, st = call("POST", "/__reset", "")
	require.Equal(t, 200, code)
	require.Zero(t, st.Requests)
	require.Empty(t, st.ByRecord)

	code, _ = call("GET", "/__topup", "")
	require.Equal(t, 405, code)
}

func TestUnknownPathsAnswerLikeTheVendor(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{})
	// GET lists stored completions (stored.go); another method is refused.
	put, err := http.NewRequest(http.MethodPut, b.srv.URL+"/v1/chat/completions", nil)
	require.NoError(t, err)
	resp, err := b.http.Do(put)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 405, resp.StatusCode)
	resp, err = b.http.Get(b.srv.URL + "/v1/chat/completions")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 401, resp.StatusCode, "the list needs the API key, as at OpenAI")
	resp, err = b.http.Post(b.srv.URL+"/v1/embeddingz", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 404, resp.StatusCode)
}

// Two runs of a seeded scenario give the same faults, ids and bodies; a
// different seed gives different faults.
func TestSeededReplay(t *testing.T) {
	t.Parallel()
	run := func(seed int64) []string {
		b := setup(t, fakeprovider.Scenario{Seed: seed, Random: []fakeprovider.RandomFault{
			{P: 0.3, Action: fakeprovider.ActionRateLimit}, {P: 0.2, Action: fakeprovider.ActionOverloaded},
		}})
		var out []string
		for i := range 30 {
			v := vendors[i%2]
			rec := string(rune('a' + i%7))
			r, err := b.post(t, ctxT(t), v, rawBody(v, rec, i%3 == 0), map[string]string{fakeprovider.RecordHeader: rec})
			require.NoError(t, err)
			out = append(out, r.body+r.header.Get("x-request-id")+r.header.Get("request-id"))
		}
		return out
	}
	first := run(42)
	require.Equal(t, first, run(42))
	require.NotEqual(t, first, run(43))
}
