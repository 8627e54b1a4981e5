package operator_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/operator"
)

// The bucket width is the smallest round one that fits the night in at
// most the given number of buckets.
func TestBucketWidth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		span time.Duration
		want time.Duration
	}{
		{0, time.Second},
		{90 * time.Second, time.Second},
		{121 * time.Second, 2 * time.Second},
		{10 * time.Minute, 5 * time.Second},
		{8 * time.Hour, 5 * time.Minute},
		{10*time.Hour + time.Second, 10 * time.Minute},
		{400 * 24 * time.Hour, 24 * time.Hour},
	} {
		require.Equal(t, tc.want, operator.BucketWidth(tc.span, 120), "span %s", tc.span)
	}
}

// BuildTimeline fills every bucket (empty ones too), stacks calls by class
// in a fixed order, rates per second of the bucket, and adds spend up.
func TestBuildTimeline(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	rows := []ledger.TimelineRow{
		{Bucket: 0, Class: "ok", Calls: 20, SpendUSD: 0.2},
		{Bucket: 0, Class: "throttled", Calls: 10},
		{Bucket: 2, Class: "ok", Calls: 5, SpendUSD: 0.05, PossiblyBilledUSD: 0.01},
		{Bucket: 2, Class: "", Calls: 1, PossiblyBilledUSD: 0.01},
		{Bucket: 4, Class: "transient", Calls: 1}, // started after end: the timeline grows
	}
	tl := operator.BuildTimeline(start, start.Add(40*time.Second), 10*time.Second, rows)
	require.Len(t, tl.Buckets, 5)
	require.Equal(t, start.Add(50*time.Second), tl.End)
	require.Equal(t, []string{"ok", "transient", "throttled", ""}, tl.Classes)
	require.Equal(t, 30, tl.Buckets[0].Total)
	require.InDelta(t, 3.0, tl.Buckets[0].RatePerS, 1e-9)
	require.Equal(t, 10, tl.Buckets[0].Calls["throttled"])
	require.Zero(t, tl.Buckets[1].Total, "an empty bucket is kept")
	require.Equal(t, start.Add(20*time.Second), tl.Buckets[2].At)
	require.InDelta(t, 0.2, tl.Buckets[1].CumSpendUSD, 1e-9)
	require.InDelta(t, 0.27, tl.Buckets[2].CumSpendUSD, 1e-9, "possibly billed counts")
	require.InDelta(t, 0.27, tl.SpendUSD, 1e-9)
	require.InDelta(t, 3.0, tl.MaxRatePerS, 1e-9)

	// A batch with no span yet still has one bucket.
	empty := operator.BuildTimeline(start, start, time.Second, nil)
	require.Len(t, empty.Buckets, 1)
	require.Empty(t, empty.Classes)
}

// A hold begins with its alert and ends with the alert that ends it, or
// when answered calls go on, or at the end while it still holds.
func TestHoldPeriods(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return start.Add(time.Duration(m) * time.Minute) }
	// Ten one-minute buckets; answered calls in minutes 0-1 and 6-7; only
	// failed calls (probes) in minute 4.
	rows := []ledger.TimelineRow{{Bucket: 0, Class: "ok", Calls: 5}, {Bucket: 1, Class: "ok", Calls: 5},
		{Bucket: 4, Class: "exhausted", Calls: 1}, {Bucket: 6, Class: "ok", Calls: 3}, {Bucket: 7, Class: "ok", Calls: 3}}
	tl := operator.BuildTimeline(start, at(10), time.Minute, rows)

	alert := func(kind string, m int) ledger.AlertRow {
		return ledger.AlertRow{Kind: kind, CreatedAt: at(m).Add(30 * time.Second), Message: kind}
	}
	for _, tc := range []struct {
		name   string
		alerts []ledger.AlertRow
		held   map[string]time.Time
		want   []operator.HoldPeriod
	}{
		{name: "exhausted until answered calls go on (a failed probe does not end it)",
			alerts: []ledger.AlertRow{alert("key_exhausted", 2)},
			want:   []operator.HoldPeriod{{Kind: operator.HoldKey, Why: "key_exhausted", From: at(2).Add(30 * time.Second), To: at(6)}}},
		{name: "resumed by hand",
			alerts: []ledger.AlertRow{alert("key_exhausted", 2), alert("key_resumed", 3)},
			want:   []operator.HoldPeriod{{Kind: operator.HoldKey, Why: "key_exhausted", From: at(2).Add(30 * time.Second), To: at(3).Add(30 * time.Second)}}},
		{name: "paused by hand, resumed",
			alerts: []ledger.AlertRow{alert("batch_paused", 2), alert("batch_resumed", 5)},
			want:   []operator.HoldPeriod{{Kind: operator.HoldPaused, Why: "batch_paused", From: at(2).Add(30 * time.Second), To: at(5).Add(30 * time.Second)}}},
		{name: "still held: to the end",
			alerts: []ledger.AlertRow{alert("budget_reached", 8)},
			held:   map[string]time.Time{operator.HoldBudget: {}},
			want:   []operator.HoldPeriod{{Kind: operator.HoldBudget, Why: "budget_reached", From: at(8).Add(30 * time.Second), To: at(10), Open: true}}},
		{name: "held now with no alert: since the breaker opened",
			held: map[string]time.Time{operator.HoldKey: at(8)},
			want: []operator.HoldPeriod{{Kind: operator.HoldKey, From: at(8), To: at(10), Open: true}}},
		{name: "held now since unknown: the last bucket",
			held: map[string]time.Time{operator.HoldPaused: {}},
			want: []operator.HoldPeriod{{Kind: operator.HoldPaused, From: at(9), To: at(10), Open: true}}},
		{name: "a second alert while held is the same hold",
			alerts: []ledger.AlertRow{alert("storm_open", 2), alert("storm_open", 3)},
			want:   []operator.HoldPeriod{{Kind: operator.HoldStorm, Why: "storm_open", From: at(2).Add(30 * time.Second), To: at(6)}}},
		{name: "other alerts are no hold",
			alerts: []ledger.AlertRow{alert("unknown_error", 2), alert("prepaid_70", 3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := operator.HoldPeriods(operator.HoldFacts{Alerts: tc.alerts, Timeline: tl, HeldNow: tc.held})
			require.Equal(t, tc.want, got)
		})
	}
}

// The key's pace history goes into the buckets, the latest point of each;
// points outside the timeline are left out, and a bucket with none has
// no pace (no worker paced the key then).
func TestAttachPace(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	tl := operator.BuildTimeline(start, start.Add(3*time.Minute), time.Minute, nil)
	require.False(t, tl.PaceHistory)
	limit := 10.0
	tl = operator.AttachPace(tl, []ledger.PacePoint{
		{At: start.Add(-10 * time.Second), RatePerS: 1},
		{At: start.Add(10 * time.Second), RatePerS: 4, LimitPerS: &limit},
		{At: start.Add(50 * time.Second), RatePerS: 5, LimitPerS: &limit},
		{At: start.Add(2*time.Minute + 10*time.Second), RatePerS: 3},
		{At: start.Add(time.Hour), RatePerS: 9},
	})
	require.True(t, tl.PaceHistory)
	require.Len(t, tl.Buckets, 3)
	require.Equal(t, 5.0, *tl.Buckets[0].PaceRatePerS, "the latest point in the bucket")
	require.Equal(t, 10.0, *tl.Buckets[0].LimitPerS)
	require.Nil(t, tl.Buckets[1].PaceRatePerS, "no worker paced the key then")
	require.Equal(t, 3.0, *tl.Buckets[2].PaceRatePerS)
	require.Nil(t, tl.Buckets[2].LimitPerS)
}
