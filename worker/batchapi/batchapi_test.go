package batchapi

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
)

func dur(d time.Duration) fakeprovider.Duration { return fakeprovider.Duration(d) }

// The whole flow on both vendors: submit, poll on the scenario clock until
// the batch ends, read results that come back out of input order, and find
// every line's outcome by custom_id.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, vendor := range vendors {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			b := setup(t, vendor, fakeprovider.Scenario{Seed: 7,
				Poison: fakeprovider.Poison{InvalidMarker: "POISON"},
				Batch:  fakeprovider.BatchScenario{ValidateFor: dur(time.Minute), Latency: dur(time.Hour)}})
			ctx := ctxT(t)
			ids := recordIDs(20)
			poisoned := map[string]bool{"r03": true, "r11": true}
			extra := func(id string) string {
				if poisoned[id] {
					return " POISON"
				}
				return ""
			}
			lines := linesFor(t, vendor, ids, extra)

			fileID, err := b.client.Upload(ctx, lines, "row-1")
			require.NoError(t, err)
			if vendor == "anthropic" {
				require.Empty(t, fileID)
				require.Zero(t, b.fp.Stats().Batches.Polls, "no file step, no call")
			} else {
				require.True(t, strings.HasPrefix(fileID, "file-"), fileID)
				require.Equal(t, 1, b.fp.Stats().Batches.FilesUploaded)
			}
			batch, err := b.client.Create(ctx, fileID, lines, "row-1")
			require.NoError(t, err)
			require.False(t, batch.Ended)
			require.False(t, batch.CreatedAt.IsZero())
			require.Equal(t, batch.CreatedAt.Add(24*time.Hour), batch.ExpiresAt)
			if vendor == "openai" {
				require.Equal(t, "validating", batch.VendorStatus)
				require.Equal(t, fileID, batch.InputFileID)
				require.Equal(t, "row-1", batch.Tag)
			} else {
				require.Equal(t, "in_progress", batch.VendorStatus)
				require.Equal(t, Counts{Total: 20, Processing: 20}, batch.Counts)
			}

			b.clock.Advance(31 * time.Minute)
			batch, err = b.client.Get(ctx, batch.ID)
			require.NoError(t, err)
			require.Equal(t, "in_progress", batch.VendorStatus)
			require.False(t, batch.Ended)
			require.Equal(t, 20, batch.Counts.Total)

			b.clock.Advance(time.Hour)
			batch, err = b.client.Get(ctx, batch.ID)
			require.NoError(t, err)
			require.True(t, batch.Ended)
			require.False(t, batch.Failed)
			require.Equal(t, Counts{Total: 20, Succeeded: 18, Errored: 2}, batch.Counts)
			require.False(t, batch.EndedAt.IsZero())

			got := results(t, ctx, b.client, batch)
			require.Len(t, got, 20)
			require.NotEqual(t, customIDsOf(lines), customIDsOfResults(got), "the provider's order, not the input order")
			byID := map[string]Result{}
			for _, r := range got {
				byID[r.CustomID] = r
			}
			for i, id := range ids {
				r, ok := byID[lines[i].CustomID]
				require.True(t, ok, id)
				require.True(t, r.Ran, id)
				obs := r.Res.Observation
				require.Equal(t, vendor, obs.Vendor)
				require.Equal(t, classify.PathDirect, obs.Path)
				require.Equal(t, classify.PhaseResponse, obs.Phase)
				v := classify.Classify(obs)
				if poisoned[id] {
					require.Equal(t, 400, obs.Status, id)
					require.Equal(t, classify.Rejected, v.Class, id)
					continue
				}
				require.Equal(t, 200, obs.Status)
				require.Equal(t, classify.OK, v.Class)
				require.Empty(t, r.Res.Malformed)
				require.Equal(t, fakeprovider.ExpectedAnswer(request(vendor, id, "").Prompt, true), r.Res.Content)
				require.Positive(t, r.Res.InputTokens)
				require.Positive(t, r.Res.OutputTokens)
				require.NotEmpty(t, r.Res.FinishReason)
				if vendor == "openai" {
					require.NotEmpty(t, obs.Headers["x-request-id"], "request_id becomes the x-request-id header")
				}
			}
			st := b.fp.Stats()
			require.Equal(t, 18, st.BilledCalls)
			require.Zero(t, st.DoubleBilledRecords)
		})
	}
}

func customIDsOfResults(rs []Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.CustomID
	}
	return out
}

// A line that fails in the batch must mean what the same failure means on a
// synchronous call: the same class and reason, so the submitter reacts with
// the reactions the worker already has. Poison, a spent balance and a rate
// limit are scenario rules; the rest are scripted per line.
func TestLineFailuresClassifyLikeSyncCalls(t *testing.T) {
	t.Parallel()
	type fault struct {
		name  string
		sc    fakeprovider.Scenario
		extra string
	}
	step := func(a fakeprovider.Action) fakeprovider.Scenario {
		return fakeprovider.Scenario{Script: []fakeprovider.Step{{Action: a}}}
	}
	faults := []fault{
		{name: "poisoned", sc: fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, extra: " POISON"},
		{name: "context_length", sc: fakeprovider.Scenario{Poison: fakeprovider.Poison{ContextTokens: 5}}},
		{name: "balance_spent", sc: fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}}},
		{name: "rate_limited", sc: fakeprovider.Scenario{RateLimit: &fakeprovider.RateLimit{RequestsPerMinute: 1, BurstRequests: 1}}},
	}
	for _, a := range []fakeprovider.Action{fakeprovider.ActionOK, fakeprovider.ActionRateLimit, fakeprovider.ActionTooLarge,
		fakeprovider.ActionExhausted, fakeprovider.ActionOverloaded, fakeprovider.ActionServerError,
		fakeprovider.ActionContextLength, fakeprovider.ActionInvalidParam, fakeprovider.ActionPolicy} {
		faults = append(faults, fault{name: string(a), sc: step(a)})
	}
	for _, vendor := range vendors {
		for _, f := range faults {
			t.Run(vendor+"/"+f.name, func(t *testing.T) {
				t.Parallel()
				sc := f.sc
				sync := syncNth(t, vendor, sc, f.extra, 1)
				if f.name == "rate_limited" {
					// The bucket holds one request: the second call is the
					// throttled one, in the batch as in sync.
					sync = syncNth(t, vendor, sc, f.extra, 2)
				}
				if f.name == "balance_spent" {
					// A spent balance refuses the create itself; a balance
					// spent mid-batch fails the lines that run after.
					sc.Balance = &fakeprovider.Balance{USD: 1e-9}
				}
				b := setup(t, vendor, sc)
				ctx := ctxT(t)
				ids := []string{"r00"}
				if f.name == "rate_limited" || f.name == "balance_spent" {
					ids = []string{"r00", "r01"}
				}
				lines := linesFor(t, vendor, ids, func(string) string { return f.extra })
				batch := b.submit(t, ctx, b.client, lines, "row-1")
				batch, err := b.client.Get(ctx, batch.ID)
				require.NoError(t, err)
				require.True(t, batch.Ended)
				got := results(t, ctx, b.client, batch)
				require.Len(t, got, len(ids))
				r := got[0]
				if len(ids) == 2 {
					// The second line to run is the one that meets the fault.
					r = pickFailed(got)
				}
				require.True(t, r.Ran)
				requireSameVerdict(t, sync.Observation, r.Res.Observation)
				require.Equal(t, sync.Observation.Status, r.Res.Observation.Status)
				require.Equal(t, sync.Content, r.Res.Content)
				require.Equal(t, sync.FinishReason, r.Res.FinishReason)
				require.Equal(t, sync.Malformed, r.Res.Malformed)
			})
		}
	}
}

// pickFailed is the one result of two that did not succeed.
func pickFailed(rs []Result) Result {
	for _, r := range rs {
		if r.Res.Observation.Status != 200 {
			return r
		}
	}
	return rs[0]
}

// An expired batch keeps its finished lines; the unfinished ones never ran.
func TestExpiryWithPartialResults(t *testing.T) {
	t.Parallel()
	for _, vendor := range vendors {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			b := setup(t, vendor, fakeprovider.Scenario{Seed: 11,
				Batch: fakeprovider.BatchScenario{Latency: dur(time.Hour), ExpireShare: 0.3}})
			ctx := ctxT(t)
			lines := linesFor(t, vendor, recordIDs(20), nil)
			batch := b.submit(t, ctx, b.client, lines, "row-1")
			b.clock.Advance(2 * time.Hour)
			batch, err := b.client.Get(ctx, batch.ID)
			require.NoError(t, err)
			require.False(t, batch.Ended, "unfinished lines wait for the window")
			b.clock.Advance(22 * time.Hour)
			batch, err = b.client.Get(ctx, batch.ID)
			require.NoError(t, err)
			require.True(t, batch.Ended)
			require.Equal(t, map[string]string{"openai": "expired", "anthropic": "ended"}[vendor], batch.VendorStatus)
			require.Equal(t, Counts{Total: 20, Succeeded: 14, Expired: 6}, batch.Counts)

			ran, expired := 0, 0
			for _, r := range results(t, ctx, b.client, batch) {
				if r.Ran {
					ran++
					require.Equal(t, classify.OK, classify.Classify(r.Res.Observation).Class)
					continue
				}
				expired++
				require.Equal(t, NotRunExpired, r.NotRun)
				require.Zero(t, r.Res, "a line that never ran has no Observation")
			}
			require.Equal(t, 14, ran)
			require.Equal(t, 6, expired)
			require.Equal(t, 14, b.fp.Stats().BilledCalls, "completed lines are billed, expired ones not")
		})
	}
}

// OpenAI validates the file after create and fails the whole batch;
// Anthropic validates the create request and refuses it.
func TestValidationFailure(t *testing.T) {
	t.Parallel()
	fv := &fakeprovider.BatchError{Code: "invalid_json_line", Line: 2, Message: "This line is not parseable as valid JSON."}
	t.Run("openai", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "openai", fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{FailValidation: fv}})
		ctx := ctxT(t)
		batch := b.submit(t, ctx, b.client, linesFor(t, "openai", recordIDs(3), nil), "row-1")
		batch, err := b.client.Get(ctx, batch.ID)
		require.NoError(t, err)
		require.True(t, batch.Ended)
		require.True(t, batch.Failed)
		require.Equal(t, "failed", batch.VendorStatus)
		require.Equal(t, []ValidationError{{Code: "invalid_json_line", Line: 2, Message: fv.Message}}, batch.Validation)
		require.Empty(t, results(t, ctx, b.client, batch), "a failed batch ran nothing")
		require.Zero(t, b.fp.Stats().BilledCalls)
	})
	t.Run("anthropic", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "anthropic", fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{FailValidation: fv}})
		ctx := ctxT(t)
		_, err := b.client.Create(ctx, "", linesFor(t, "anthropic", recordIDs(3), nil), "row-1")
		var ce *CallError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "create", ce.Op)
		require.Equal(t, 400, ce.Res.Observation.Status)
		require.Equal(t, classify.Rejected, classify.Classify(ce.Res.Observation).Class)
		require.NotContains(t, err.Error(), fv.Message, "the body stays out of the error string")
		require.Zero(t, b.fp.Stats().Batches.Created)
	})
}

// A cancelled batch ends with what had run; the rest never ran and comes
// back canceled (Anthropic) or not at all (OpenAI).
func TestCancel(t *testing.T) {
	t.Parallel()
	for _, vendor := range vendors {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			b := setup(t, vendor, fakeprovider.Scenario{Seed: 5,
				Batch: fakeprovider.BatchScenario{Latency: dur(time.Hour), CancelFor: dur(5 * time.Minute)}})
			ctx := ctxT(t)
			lines := linesFor(t, vendor, recordIDs(10), nil)
			batch := b.submit(t, ctx, b.client, lines, "row-1")
			b.clock.Advance(30 * time.Minute)
			batch, err := b.client.Cancel(ctx, batch.ID)
			require.NoError(t, err)
			require.False(t, batch.Ended)
			require.Equal(t, map[string]string{"openai": "cancelling", "anthropic": "canceling"}[vendor], batch.VendorStatus)
			for !batch.Ended {
				b.clock.Advance(time.Minute)
				batch, err = b.client.Get(ctx, batch.ID)
				require.NoError(t, err)
			}
			require.Equal(t, 5, batch.Counts.Succeeded)
			require.Equal(t, 5, batch.Counts.Canceled)
			require.Zero(t, batch.Counts.Processing)

			seen := map[string]bool{}
			ran, canceled := 0, 0
			for _, r := range results(t, ctx, b.client, batch) {
				seen[r.CustomID] = true
				if r.Ran {
					ran++
				} else {
					require.Equal(t, NotRunCanceled, r.NotRun)
					canceled++
				}
			}
			missing := 0
			for _, l := range lines {
				if !seen[l.CustomID] {
					missing++
				}
			}
			require.Equal(t, 5, ran)
			require.Equal(t, 5, b.fp.Stats().BilledCalls)
			if vendor == "anthropic" {
				require.Equal(t, 5, canceled)
				require.Zero(t, missing)
			} else {
				require.Zero(t, canceled)
				require.Equal(t, 5, missing, "OpenAI writes no line for what a cancel stopped")
			}
		})
	}
}

func TestFindOpenAI(t *testing.T) {
	t.Parallel()
	b := setup(t, "openai", fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: dur(time.Hour)}})
	ctx := ctxT(t)
	since := b.clock.Now()
	target := b.submit(t, ctx, b.client, linesFor(t, "openai", recordIDs(2), nil), "row-42")
	// Enough newer batches that the target is on the second page.
	for i := range listPageSize + 3 {
		b.clock.Advance(time.Second)
		b.submit(t, ctx, b.client, linesFor(t, "openai", []string{"x" + strings.Repeat("y", i%3)}, nil), "row-other")
	}
	fresh := b.newClient(t, testKey) // a restarted process
	got, found, err := fresh.Find(ctx, "row-42", since, nil, nil)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, target.ID, got.ID)
	require.Equal(t, "row-42", got.Tag)

	_, found, err = fresh.Find(ctx, "row-43", since, nil, nil)
	require.NoError(t, err)
	require.False(t, found)

	// Batches older than since (less the clock skew) are not looked at.
	_, found, err = fresh.Find(ctx, "row-42", b.clock.Now().Add(FindClockSkew+time.Minute), nil, nil)
	require.NoError(t, err)
	require.False(t, found)
}

func TestFindAnthropic(t *testing.T) {
	t.Parallel()
	b := setup(t, "anthropic", fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: dur(time.Hour)}})
	ctx := ctxT(t)
	since := b.clock.Now()
	linesA := linesFor(t, "anthropic", []string{"a1", "a2", "a3"}, nil)
	linesB := linesFor(t, "anthropic", []string{"b1", "b2", "b3"}, nil)
	batchA := b.submit(t, ctx, b.client, linesA, "")
	b.clock.Advance(time.Second)
	batchB := b.submit(t, ctx, b.client, linesB, "")
	b.clock.Advance(time.Second)
	b.submit(t, ctx, b.client, linesFor(t, "anthropic", []string{"c1", "c2"}, nil), "")
	fresh := b.newClient(t, testKey)

	// Running batches of the right size cannot be told apart yet.
	cand, found, err := fresh.Find(ctx, "", since, customIDsOf(linesA), nil)
	require.ErrorIs(t, err, ErrUnconfirmed)
	require.False(t, found)
	require.Contains(t, []string{batchA.ID, batchB.ID}, cand.ID)
	// No running batch of that size: nothing to wait for.
	_, found, err = fresh.Find(ctx, "", since, []string{"z1"}, nil)
	require.NoError(t, err)
	require.False(t, found)

	b.clock.Advance(2 * time.Hour)
	got, found, err := fresh.Find(ctx, "", since, customIDsOf(linesA), nil)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, batchA.ID, got.ID)
	got, found, err = fresh.Find(ctx, "", since, reversed(customIDsOf(linesB)), nil)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, batchB.ID, got.ID)

	_, found, err = fresh.Find(ctx, "", since, customIDsOf(linesFor(t, "anthropic", []string{"a1", "a2", "z9"}, nil)), nil)
	require.NoError(t, err)
	require.False(t, found, "same size, other lines")
	_, found, err = fresh.Find(ctx, "", b.clock.Now().Add(FindClockSkew+time.Minute), customIDsOf(linesA), nil)
	require.NoError(t, err)
	require.False(t, found, "created before since")

	// The same lines sent again in a new batch: the earlier batch of them
	// is recorded already (known), the new one is found, and while the
	// new one runs, only it is a candidate.
	recorded := func(_ context.Context, id string) (bool, error) { return id == batchA.ID, nil }
	_, found, err = fresh.Find(ctx, "", since, customIDsOf(linesA), recorded)
	require.NoError(t, err)
	require.False(t, found, "the only batch of these lines is recorded: nothing to find, safe to send")
	again := b.submit(t, ctx, b.client, linesA, "")
	cand, found, err = fresh.Find(ctx, "", since, customIDsOf(linesA), recorded)
	require.ErrorIs(t, err, ErrUnconfirmed)
	require.False(t, found)
	require.Equal(t, again.ID, cand.ID)
	b.clock.Advance(2 * time.Hour)
	got, found, err = fresh.Find(ctx, "", since, customIDsOf(linesA), recorded)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, again.ID, got.ID)
}

// Find pages through the account's batches, newest first, to one created
// long before many others.
func TestFindAnthropicPaginates(t *testing.T) {
	t.Parallel()
	b := setup(t, "anthropic", fakeprovider.Scenario{})
	ctx := ctxT(t)
	since := b.clock.Now()
	lines := linesFor(t, "anthropic", []string{"a1", "a2", "a3"}, nil)
	target := b.submit(t, ctx, b.client, lines, "")
	for range listPageSize + 3 {
		b.clock.Advance(time.Second)
		b.submit(t, ctx, b.client, linesFor(t, "anthropic", []string{"x"}, nil), "")
	}
	got, found, err := b.newClient(t, testKey).Find(ctx, "", since, customIDsOf(lines), nil)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, target.ID, got.ID)
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

func TestBadInputMakesNoCall(t *testing.T) {
	t.Parallel()
	for _, vendor := range vendors {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			b := setup(t, vendor, fakeprovider.Scenario{})
			ctx := ctxT(t)
			good := line(t, vendor, "r1", "")
			for name, lines := range map[string][]Line{
				"empty":      nil,
				"no id":      {{Body: good.Body}},
				"long id":    {{CustomID: strings.Repeat("k", 65), Body: good.Body}},
				"duplicate":  {good, good},
				"not json":   {{CustomID: "k", Body: []byte(`{"model":`)}},
				"not object": {{CustomID: "k", Body: []byte(`[1]`)}},
			} {
				var err error
				if vendor == "openai" {
					_, err = b.client.Upload(ctx, lines, "t")
				} else {
					_, err = b.client.Create(ctx, "", lines, "t")
				}
				require.ErrorIs(t, err, ErrInvalidLines, name)
			}
			_, err := b.client.Get(ctx, "")
			require.ErrorIs(t, err, ErrInvalidID)
			_, err = b.client.Cancel(ctx, "../files")
			require.ErrorIs(t, err, ErrInvalidID)
			for _, err := range b.client.Results(ctx, Batch{ID: "x"}) {
				require.ErrorIs(t, err, ErrNotEnded)
			}
			require.Zero(t, b.fp.Stats().Batches.Polls)
		})
	}
	_, err := New(Options{Vendor: "groq", BaseURL: "https://api.groq.com/openai/v1", APIKey: "k"})
	require.True(t, errors.Is(err, ErrUnsupportedVendor))
}
