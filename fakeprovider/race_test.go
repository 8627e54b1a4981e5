package fakeprovider_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// Many clients at once, both vendors, streams, random faults and idempotent
// retries: every counter must equal what the clients saw, exactly.
func TestCountersAddUpUnderConcurrency(t *testing.T) {
	t.Parallel()
	const workers, perWorker = 16, 20
	b := setup(t, fakeprovider.Scenario{Seed: 9, Random: []fakeprovider.RandomFault{
		{P: 0.2, Action: fakeprovider.ActionRateLimit},
		{P: 0.1, Action: fakeprovider.ActionOverloaded},
		{P: 0.05, Action: fakeprovider.ActionServerError},
	}})

	type tally struct {
		statuses map[int]int
		billed   int
		replays  int
		usd      float64
		requests int
	}
	var mu sync.Mutex
	total := tally{statuses: map[int]int{}}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			mine := tally{statuses: map[int]int{}}
			for i := range perWorker {
				v := vendors[(w+i)%2]
				rec := fmt.Sprintf("r-%d-%d", w, i)
				hdr := map[string]string{fakeprovider.RecordHeader: rec, fakeprovider.IdempotencyHeader: "k-" + rec}
				firstOK := false
				for attempt := range 2 { // the second attempt reuses the key
					body := rawBody(v, rec, (w+i)%3 == 0)
					if v == "openai" {
						body = strings.Replace(body, `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
					}
					r, err := b.post(t, ctxT(t), v, body, hdr)
					if err != nil {
						t.Error(err)
						return
					}
					mine.requests++
					mine.statuses[r.status]++
					if r.status != 200 {
						continue
					}
					if attempt == 1 && firstOK {
						mine.replays++
						continue
					}
					firstOK = true
					mine.billed++
					mine.usd += costOf(t, r.body)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			total.requests += mine.requests
			total.billed += mine.billed
			total.replays += mine.replays
			total.usd += mine.usd
			for k, n := range mine.statuses {
				total.statuses[k] += n
			}
		})
	}
	wg.Wait()

	st := b.fp.Stats()
	require.Equal(t, workers*perWorker*2, total.requests)
	require.Equal(t, total.requests, st.Requests)
	require.Equal(t, total.statuses, st.ByStatus)
	require.Equal(t, total.billed, st.BilledCalls)
	require.Equal(t, total.replays, st.IdempotentReplays)
	require.InDelta(t, total.usd, st.BilledUSD, 1e-12)
	require.Zero(t, st.DoubleBilledRecords, "every retry reused its key")
	require.Len(t, st.ByRecord, workers*perWorker)
	sum := 0
	for _, rs := range st.ByRecord {
		sum += rs.Requests
		require.Len(t, rs.Statuses, rs.Requests)
		require.Len(t, rs.IdempotencyKeys, rs.Requests)
		require.Equal(t, rs.IdempotencyKeys[0], rs.IdempotencyKeys[1])
		require.LessOrEqual(t, rs.Billed, 1)
	}
	require.Equal(t, st.Requests, sum)
	require.GreaterOrEqual(t, st.PeakInFlight, 1)
	require.LessOrEqual(t, st.PeakInFlight, workers)
	require.Zero(t, st.InFlight)
	require.Positive(t, st.ByStatus[429], "the faults fired")
}

// costOf prices a billed answer from the usage the client was told, at the
// default prices. Streams carry it in their events (OpenAI with include_usage).
func costOf(t *testing.T, body string) float64 {
	type usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		InputTokens      int `json:"input_tokens"`
		OutputTokens     int `json:"output_tokens"`
	}
	var in, out int
	add := func(u *usage) {
		if u == nil {
			return
		}
		in = max(in, u.PromptTokens, u.InputTokens)
		out = max(out, u.CompletionTokens, u.OutputTokens)
	}
	events := []string{body}
	if !strings.HasPrefix(body, "{") {
		events = nil
		for _, line := range strings.Split(body, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
				events = append(events, d)
			}
		}
	}
	for _, e := range events {
		var ev struct {
			Usage   *usage `json:"usage"`
			Message *struct {
				Usage *usage `json:"usage"`
			} `json:"message"`
		}
		require.NoError(t, json.Unmarshal([]byte(e), &ev))
		add(ev.Usage)
		if ev.Message != nil {
			add(ev.Message.Usage)
		}
	}
	require.Positive(t, in)
	require.Positive(t, out)
	return float64(in)*fakeprovider.InputUSDPerMTokDefault/1e6 + float64(out)*fakeprovider.OutputUSDPerMTokDefault/1e6
}
