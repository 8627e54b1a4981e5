package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/submitter"
)

func TestProgressLine(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 2, 14, 0, 0, time.UTC)
	opened, probe := now.Add(-time.Minute), now.Add(41*time.Second)
	ks := &keys.KeyStatus{Key: "main", State: keys.StateOpen, OpenedAt: &opened, NextProbe: &probe, Now: now}
	st := ledger.Status{Batch: "b1", Total: 10, Completed: 4, DeadLettered: 1, Pending: 5, Calls: 7, SpendUSD: 0.0021,
		State: ledger.BatchPausedExhausted}
	line := progressLine(st, ks, 2*time.Second, true)
	require.Equal(t, "[########........] 4/10 done · 1 dead · 5 pending · paused: key main exhausted since "+
		opened.Local().Format("15:04")+", next probe in 41s · 7 calls · $0.002100 · 2.5/s", line)
	require.Equal(t, "[########........] 4/10 done · 1 dead · 5 …", fitWidth(line, 44), "one column short of the width")
	require.Equal(t, line, fitWidth(line, 0))
	require.Equal(t, "progress: 4/10 done, 1 dead-lettered, 5 pending, 7 calls, $0.002100, 2.5/s, "+
		"paused: key main exhausted since "+opened.Local().Format("15:04")+", next probe in 41s", progressLine(st, ks, 2*time.Second, false))

	st.State = ledger.BatchRunning
	pause := &keys.Pause{Key: "main", Reason: "throttled", Until: now.Add(1200 * time.Millisecond)}
	require.Equal(t, "throttled: key main paused for 1.2s",
		describeState(st, &keys.KeyStatus{Key: "main", State: keys.StateClosed, Pause: pause, Now: now}))
	require.Equal(t, "running", describeState(st, &keys.KeyStatus{Key: "main", State: keys.StateClosed, Now: now}))
	storm := &keys.KeyStatus{Key: "main", State: keys.StateClosed, Now: now,
		Storm: keys.StormStatus{State: keys.StateOpen, OpenedAt: &opened, NextProbe: &probe}}
	require.Equal(t, "waiting: key main in a storm of provider failures since "+opened.Local().Format("15:04")+", next probe in 41s",
		describeState(st, storm), "a batch held by the storm breaker says so, though its state is running")
	storm.Storm.State = keys.StateHalfOpen
	require.Equal(t, "waiting: key main in a storm of provider failures since "+opened.Local().Format("15:04")+", probing", describeState(st, storm))

	st.State, st.Fallback = ledger.BatchPausedExhausted, 3
	require.Equal(t, "paused: key main exhausted since "+opened.Local().Format("15:04")+", next probe in 41s; 3 records moved to a fallback model",
		describeState(st, ks), "a paused batch going on on a fallback does not read as stopped")
	st.State, st.Fallback = ledger.BatchRunning, 0
	require.True(t, strings.HasPrefix(progressLine(st, nil, 0, false), "progress: 4/10 done"))
}

func TestProgressOnTerminalRedrawsAroundLogLines(t *testing.T) {
	t.Parallel()
	var w strings.Builder
	p := newProgress(&w, true, 0)
	p.show("bar 1", time.Now(), false)
	p.show("bar 2", time.Now(), false)
	p.event(time.Date(2026, 1, 1, 2, 13, 0, 0, time.Local), "key main exhausted")
	p.finish()
	require.Equal(t, "\rbar 1\x1b[K\rbar 2\x1b[K\r\x1b[K02:13:00 key main exhausted\nbar 2\x1b[K\n", w.String())

	w.Reset()
	p = newProgress(&w, false, time.Hour)
	start := time.Now()
	p.show("one", start, false)
	p.show("two", start.Add(time.Minute), false)
	p.show("three", start.Add(2*time.Minute), true)
	require.Equal(t, "one\nthree\n", w.String(), "plain lines at most once per interval, and the last")
}

func TestTerminalWidth(t *testing.T) {
	t.Parallel()
	env := func(cols string) func(string) string {
		return func(k string) string {
			if k == "COLUMNS" {
				return cols
			}
			return ""
		}
	}
	var buf strings.Builder
	require.Equal(t, 120, terminalWidth(&buf, env("120")), "not a terminal: $COLUMNS")
	require.Equal(t, 0, terminalWidth(&buf, env("")))
	require.Equal(t, 0, terminalWidth(&buf, env("wide")))
	require.Equal(t, 0, terminalWidth(&buf, env("-3")))
	require.False(t, isTerminal(&buf))
	devNull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devNull.Close()
	require.False(t, isTerminal(devNull), "a character device that is not a terminal")
	require.Equal(t, 80, terminalWidth(devNull, env("80")))
}

func TestProgressLineSaysPacing(t *testing.T) {
	t.Parallel()
	st := ledger.Status{Batch: "b1", Total: 10, Completed: 4, Pending: 6, State: ledger.BatchRunning}
	line := progressLine(st, nil, 2*time.Second, false)
	binding := keys.PaceState{Source: keys.PaceHeaders, FleetRate: 29.1, ShareRate: 29.1, Live: 1, Binding: true}
	require.Equal(t, line+", pacing at 29.1/s", withPacing(line, st, binding, false))
	bar := progressLine(st, nil, 2*time.Second, true)
	shared := keys.PaceState{Source: keys.PaceThrottles, FleetRate: 29.1, ShareRate: 14.55, Live: 2, Binding: true}
	require.Equal(t, bar+" · pacing at 14.6/s (29.1/s across 2 processes)", withPacing(bar, st, shared, true))

	idle := binding
	idle.Binding = false
	require.Equal(t, line, withPacing(line, st, idle, false), "not said while the pace does not hold calls back")
	st.State = ledger.BatchSettled
	require.Equal(t, line, withPacing(line, st, binding, false), "nor once the batch is settled")
}

// A running batch whose lines wait on a provider says on what, and why
// lines not sent yet are not sent; a batch with none reads as before.
func TestProgressBatchWait(t *testing.T) {
	t.Parallel()
	id := "batch_6752"
	inProgress := "in_progress"
	st := ledger.Status{Batch: "b1", Total: 50, Pending: 50, Calls: 50, State: ledger.BatchRunning}
	line := progressLine(st, nil, time.Second, false)
	require.Equal(t, line, withBatchWait(line, st, 0, false, false), "nothing in provider batches: unchanged")

	st.BatchLinesUnsent = 50
	gather := batchGather(submitter.Tuning{}, &config.Config{}, "main")
	require.Equal(t, line+", 50 lines to send as a provider batch (sent once no new line has come for 30s)",
		withBatchWait(line, st, gather, false, false), "the submitter's default gather")
	require.Equal(t, "1 line to send as a provider batch (sent once no new line has come for 2s)",
		describeBatchWait(ledger.Status{State: ledger.BatchRunning, BatchLinesUnsent: 1}, 2*time.Second, false))
	require.Equal(t, "2 lines taken back for sync calls (the deadline is within auto_margin)",
		describeBatchWait(ledger.Status{State: ledger.BatchRunning, BatchLinesUnsent: 2}, 0, true), "auto near its deadline: not gathered")

	st.BatchLinesUnsent = 0
	st.ProviderBatches = []ledger.ProviderBatchStatus{{ID: 3, ProviderBatchID: &id, State: "submitted", VendorStatus: &inProgress,
		Lines: 50, BatchLines: 50}}
	require.Equal(t, line+", waiting for provider batch batch_6752 (50 lines, in_progress)", withBatchWait(line, st, 0, false, false))
	bar := progressLine(st, nil, time.Second, true)
	require.Equal(t, bar+" · waiting for provider batch batch_6752 (50 lines, in_progress)", withBatchWait(bar, st, 0, false, true))

	st.ProviderBatches[0].CancelRequested = true
	st.ProviderBatches = append(st.ProviderBatches,
		ledger.ProviderBatchStatus{ID: 4, State: "intent", Lines: 120, BatchLines: 2},
		ledger.ProviderBatchStatus{ID: 5, ProviderBatchID: &id, State: "ended", Lines: 1, BatchLines: 1})
	st.BatchLinesUnsent = 3
	require.Equal(t, "waiting for 3 provider batches: batch_6752 (50 lines, in_progress, cancel requested); "+
		"#4 (2 of 120 lines, not submitted yet); batch_6752 (1 line, ended, collecting the results); "+
		"3 lines to send as a provider batch (sent once no new line has come for 30s)", describeBatchWait(st, gather, false))

	failed := "batchapi: get: status 404 (invalid_request_error)"
	require.Equal(t, "waiting for provider batch batch_6752 (1 line, in_progress, last request failed: "+failed+")",
		describeBatchWait(ledger.Status{State: ledger.BatchRunning, ProviderBatches: []ledger.ProviderBatchStatus{{ID: 6,
			ProviderBatchID: &id, State: "submitted", VendorStatus: &inProgress, Lines: 1, BatchLines: 1, LastError: &failed}}}, 0, false),
		"a stale status says why")

	st.State = ledger.BatchSettled
	require.Equal(t, line, withBatchWait(line, st, 0, false, false), "a settled batch waits for nothing")
}

// The progress line's gather is the submitter's: its default under the
// Go option, the key's batch_gather over both.
func TestBatchGatherIsTheSubmitters(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Keys: []config.Key{{Name: "main"}, {Name: "slow", BatchGather: time.Minute}}}
	require.Equal(t, submitter.GatherDefault, batchGather(submitter.Tuning{}, cfg, "main"))
	require.Equal(t, submitter.Tuning{}.WithDefaults().Gather, batchGather(submitter.Tuning{}, cfg, "gone"))
	require.Equal(t, 2*time.Second, batchGather(submitter.Tuning{Gather: 2 * time.Second}, cfg, "main"))
	require.Equal(t, time.Minute, batchGather(submitter.Tuning{Gather: 2 * time.Second}, cfg, "slow"))
}

// An auto pipeline's deadline is near once within its auto_margin; other
// modes and batches without a deadline never are.
func TestDeadlineNear(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cfg := &config.Config{Pipelines: []config.Pipeline{
		{Name: "a", Mode: config.ModeAuto, AutoMargin: time.Hour},
		{Name: "b", Mode: config.ModeBatch},
	}}
	in := func(d time.Duration) *time.Time { at := now.Add(d); return &at }
	require.True(t, deadlineNear(cfg, ledger.Status{Pipeline: "a", Deadline: in(59 * time.Minute)}, now))
	require.False(t, deadlineNear(cfg, ledger.Status{Pipeline: "a", Deadline: in(2 * time.Hour)}, now))
	require.False(t, deadlineNear(cfg, ledger.Status{Pipeline: "a"}, now), "no deadline")
	require.False(t, deadlineNear(cfg, ledger.Status{Pipeline: "b", Deadline: in(time.Minute)}, now), "mode batch waits for the provider")
	require.False(t, deadlineNear(cfg, ledger.Status{Pipeline: "gone", Deadline: in(time.Minute)}, now))
}
