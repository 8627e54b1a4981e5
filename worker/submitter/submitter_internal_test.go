package submitter

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/batchapi"
	"github.com/triage-dev/triage/worker/config"
)

func lines(n int) []line {
	out := make([]line, n)
	for i := range out {
		out[i] = line{id: int64(i + 1), customID: fmt.Sprintf("c%d", i+1)}
	}
	return out
}

func ids(ls []line) []int64 {
	out := make([]int64, len(ls))
	for i, l := range ls {
		out[i] = l.id
	}
	return out
}

// A provider batch holds one model's lines, at most MaxLines of them and
// MaxBytes as sent; a line of another model waits for a batch of its own.
func TestGroupKeepsWithinTheLimits(t *testing.T) {
	t.Parallel()
	type in struct {
		model string
		size  int64
	}
	for _, tc := range []struct {
		name     string
		limit    batchapi.Limits
		lines    []in
		want     []int64
		wantFull bool
	}{
		{"by count", batchapi.Limits{MaxLines: 3, MaxBytes: 1 << 20},
			[]in{{"m", 10}, {"m", 10}, {"m", 10}, {"m", 10}}, []int64{1, 2, 3}, true},
		{"by bytes", batchapi.Limits{MaxLines: 100, MaxBytes: 25},
			[]in{{"m", 10}, {"m", 10}, {"m", 10}}, []int64{1, 2}, true},
		{"exactly the bytes", batchapi.Limits{MaxLines: 100, MaxBytes: 20},
			[]in{{"m", 10}, {"m", 10}}, []int64{1, 2}, true},
		{"one model", batchapi.Limits{MaxLines: 100, MaxBytes: 1 << 20},
			[]in{{"a", 10}, {"b", 10}, {"a", 10}}, []int64{1, 3}, false},
		{"a first line over the bytes goes alone", batchapi.Limits{MaxLines: 100, MaxBytes: 5},
			[]in{{"m", 10}, {"m", 1}}, []int64{1}, true},
		{"room left", batchapi.Limits{MaxLines: 100, MaxBytes: 1 << 20},
			[]in{{"m", 10}, {"m", 10}}, []int64{1, 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := group{limit: tc.limit}
			full := false
			for i, l := range tc.lines {
				if _, full = g.add(line{id: int64(i + 1)}, l.model, l.size); full {
					break
				}
			}
			require.Equal(t, tc.want, ids(g.lines))
			require.Equal(t, tc.wantFull, full)
			require.Equal(t, tc.lines[0].model, g.model)
			var bytes int64
			for _, id := range tc.want {
				bytes += tc.lines[id-1].size
			}
			require.Equal(t, bytes, g.bytes)
		})
	}
}

// Halving keeps the input order, loses no line and takes n lines to one in
// ceil(log2 n) steps: the bound on the creates bisection costs.
func TestHalvesSplitEvenlyInOrder(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 3, 7, 64, 50000} {
		a, b := halves(lines(n))
		require.Len(t, a, (n+1)/2)
		require.Len(t, b, n/2)
		require.Equal(t, ids(lines(n)), append(ids(a), ids(b)...))
		// Appending to a must not overwrite b.
		a = append(a, line{id: -1})
		require.NotEqual(t, int64(-1), b[0].id)

		steps, m := 0, n
		for m > 1 {
			m = (m + 1) / 2
			steps++
		}
		k := 0
		for 1<<k < n {
			k++
		}
		require.Equal(t, k, steps, "n=%d", n)
	}
}

// The poll backoff doubles from PollMin to PollMax, with equal jitter: each
// wait is within [d/2, d].
func TestJitterDoublesToTheCap(t *testing.T) {
	t.Parallel()
	base, limit := 30*time.Second, 10*time.Minute
	for n, d := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
		10 * time.Minute, 10 * time.Minute} {
		for range 200 {
			w := jitter(base, limit, n)
			require.GreaterOrEqual(t, w, d/2, "n=%d", n)
			require.LessOrEqual(t, w, d, "n=%d", n)
		}
	}
	require.LessOrEqual(t, jitter(base, limit, 1000), limit, "no overflow far out")
	require.Equal(t, time.Duration(0), jitter(0, limit, 3))
}

// The halving stops after 2·⌈log2 n⌉+2 refusals in a row unless
// MaxRefusals says otherwise: room for a quota only batches of n/2^k fit
// (k refusals) and for one bad line's two, not for 2n−1.
func TestRefusalLimit(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{1: 2, 2: 4, 10: 10, 64: 14, 2000: 24, 50000: 34, 100000: 36} {
		require.Equal(t, want, refusalLimit(0, n), "n=%d", n)
	}
	require.Equal(t, 5, refusalLimit(5, 100000), "set explicitly")
}

func TestTuningDefaults(t *testing.T) {
	t.Parallel()
	got := Tuning{}.WithDefaults()
	require.Equal(t, Tuning{Tick: TickDefault, Gather: GatherDefault, PollMin: PollMinDefault, PollMax: PollMaxDefault,
		Lease: LeaseDefault}, got)
	set := Tuning{Tick: time.Second, Gather: 2 * time.Second, PollMin: 3 * time.Second, PollMax: 4 * time.Second,
		Lease: 5 * time.Second, MaxLines: 6, MaxRefusals: 7}
	require.Equal(t, set, set.WithDefaults())
}

// An answer nobody applies (its job was cancelled by hand) is priced as
// the job would have priced it: its usage at the model's batch prices.
func TestOrphanOutcomePricesTheAnswer(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
[[keys]]
name = "main"
vendor = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "K"

[[models]]
name = "m"
key = "main"
input_usd_per_mtok = 2
output_usd_per_mtok = 8

[[pipelines]]
name = "p"
model = "m"
prompt = "{{json .}}"
mode = "batch"
`), "test.toml")
	require.NoError(t, err)
	key, err := cfg.Key("main")
	require.NoError(t, err)
	client, err := batchapi.New(batchapi.Options{Vendor: "openai", BaseURL: "http://127.0.0.1:9/v1", APIKey: "k"})
	require.NoError(t, err)
	s := &Submitter{cfg: Config{Key: key, Config: cfg, Client: client}}

	body, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion", "model": "m",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "{}"}}},
		"usage":   map[string]any{"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}})
	ok := ledger.BatchLineAnswer{Observation: classify.Observation{Vendor: "openai", Phase: classify.PhaseResponse, Status: 200, Body: string(body)}}
	out := s.answerOutcome(ok, "m", ReasonJobGone)
	require.Equal(t, ledger.AttemptOK, out.Status)
	require.Equal(t, classify.OK, out.Class)
	require.Equal(t, ReasonJobGone, out.Reason)
	require.Equal(t, 1000, out.InputTokens)
	require.Equal(t, 500, out.OutputTokens)
	require.InDelta(t, (1000*1+500*4)/1e6, out.CostUSD, 1e-12, "half the sync prices")
	require.NotNil(t, out.SyncCostUSD)
	require.InDelta(t, (1000*2+500*8)/1e6, *out.SyncCostUSD, 1e-12)

	refused := s.answerOutcome(ledger.BatchLineAnswer{RejectReason: "batch_validation:x", RejectCode: "x"}, "m", ReasonJobGone)
	require.Equal(t, ledger.AttemptFailed, refused.Status)
	require.Zero(t, refused.CostUSD, "a line refused at validation never ran")
	require.Equal(t, "x", refused.VendorCode)
}

// The key's timing from triage.toml goes over the worker's options, field
// by field; a backoff it would invert is not inverted.
func TestTuningForKey(t *testing.T) {
	t.Parallel()
	opts := Tuning{Tick: time.Second, Gather: 10 * time.Second, PollMax: time.Minute}
	require.Equal(t, opts, opts.ForKey(&config.Key{}), "nothing in the file: the options")
	got := opts.ForKey(&config.Key{BatchGather: 2 * time.Second, BatchPollMin: time.Second})
	require.Equal(t, Tuning{Tick: time.Second, Gather: 2 * time.Second, PollMin: time.Second, PollMax: time.Minute}, got)
	got = opts.ForKey(&config.Key{BatchPollMin: 5 * time.Minute})
	require.Equal(t, 5*time.Minute, got.PollMin)
	require.Equal(t, 5*time.Minute, got.PollMax, "poll_max raised to the file's poll_min")
	got = Tuning{}.ForKey(&config.Key{BatchPollMax: 5 * time.Second}).WithDefaults()
	require.Equal(t, 5*time.Second, got.PollMin, "a poll_max under the default poll_min: the one given is meant")
	require.Equal(t, 5*time.Second, got.PollMax)
}
