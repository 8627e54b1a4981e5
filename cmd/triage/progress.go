package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/operator"
	"github.com/triage-dev/triage/worker/submitter"
)

// progressIntervalDefault is how often `triage run` prints a plain progress
// line when stderr is not a terminal.
const progressIntervalDefault = 5 * time.Second

// redrawEvery is how often the progress bar is redrawn on a terminal.
const redrawEvery = 250 * time.Millisecond

// progress draws a batch's progress on w: on a terminal one line redrawn in
// place (\r), elsewhere one plain line per interval. Log lines and events
// written through it are printed above the bar, which is then redrawn, so
// they never tear it. Safe for concurrent use.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	columns  func() int // the terminal's width now (read on each redraw, so a resize is followed); nil or 0: unknown
	interval time.Duration
	line     string    // what the bar shows now (terminal)
	printed  time.Time // when the last plain line was printed
}

func newProgress(w io.Writer, tty bool, interval time.Duration) *progress {
	if interval <= 0 {
		interval = progressIntervalDefault
	}
	return &progress{w: w, tty: tty, interval: interval}
}

// show draws line: redrawn at once on a terminal, printed elsewhere when the
// interval has passed since the last line (or when force is set).
func (p *progress) show(line string, now time.Time, force bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		if p.columns != nil {
			line = fitWidth(line, p.columns())
		}
		p.line = line
		fmt.Fprint(p.w, "\r"+line+"\x1b[K")
		return
	}
	if force || p.printed.IsZero() || now.Sub(p.printed) >= p.interval {
		p.printed = now
		fmt.Fprintln(p.w, line)
	}
}

// Write prints b (whole lines: a log event) above the bar.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		return p.w.Write(b)
	}
	fmt.Fprint(p.w, "\r\x1b[K")
	n, err := p.w.Write(b)
	if p.line != "" {
		fmt.Fprint(p.w, p.line+"\x1b[K")
	}
	return n, err
}

// event prints one line of narration above the bar.
func (p *progress) event(now time.Time, format string, args ...any) {
	fmt.Fprintf(p, "%s %s\n", now.Format(time.TimeOnly), fmt.Sprintf(format, args...))
}

// finish ends the bar's line so what follows starts on a fresh one.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.line != "" {
		fmt.Fprintln(p.w)
		p.line = ""
	}
}

// progressLine is one look at a batch in words: counts, the state, calls,
// spend and the rate of records settled per second of elapsed. On a
// terminal it is the compact bar line, the state before the figures a
// narrow terminal would cut off.
func progressLine(st ledger.Status, ks *keys.KeyStatus, elapsed time.Duration, bar bool) string {
	settled := st.Completed + st.DeadLettered
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(settled) / s
	}
	state := describeState(st, ks)
	if !bar {
		return fmt.Sprintf("progress: %d/%d done, %d dead-lettered, %d pending, %d calls, %s, %.1f/s, %s",
			st.Completed, st.Total, st.DeadLettered, st.Pending, st.Calls, usd(st.SpendUSD), rate, state)
	}
	const width = 16
	filled := 0
	if st.Total > 0 {
		filled = settled * width / st.Total
	}
	return fmt.Sprintf("[%s%s] %d/%d done · %d dead · %d pending · %s · %d calls · %s · %.1f/s",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		st.Completed, st.Total, st.DeadLettered, st.Pending, state, st.Calls, usd(st.SpendUSD), rate)
}

// withPacing adds "pacing at N/s" to a running batch's line while the key's
// pacer holds calls back (the rate, not the workers, sets the speed): this
// process's share, and the fleet's rate when processes share the key.
func withPacing(line string, st ledger.Status, ps keys.PaceState, bar bool) string {
	if st.State != ledger.BatchRunning || !ps.Binding || ps.ShareRate <= 0 {
		return line
	}
	s := fmt.Sprintf("pacing at %.1f/s", ps.ShareRate)
	if ps.Live > 1 {
		s += fmt.Sprintf(" (%.1f/s across %d processes)", ps.FleetRate, ps.Live)
	}
	if bar {
		return line + " · " + s
	}
	return line + ", " + s
}

// withBatchWait adds what a running batch's batch-mode lines wait for: the
// provider batches holding them, with the vendor's status as last polled,
// and the lines the key's submitter has not sent yet, with why (it gathers
// a run's lines into one provider batch, sent once no new line has come for
// gather). Without it a batch waiting minutes to hours on a provider reads
// as stuck at 0 done.
func withBatchWait(line string, st ledger.Status, gather time.Duration, near, bar bool) string {
	if st.State != ledger.BatchRunning {
		return line
	}
	w := describeBatchWait(st, gather, near)
	if w == "" {
		return line
	}
	if bar {
		return line + " · " + w
	}
	return line + ", " + w
}

// describeBatchWait says what the batch's lines wait for, e.g. "waiting for
// provider batch batch_6752 (50 lines, in_progress)"; "" when none waits.
// near: an auto pipeline's deadline is within its margin, so the lines not
// sent are being taken back for sync calls, not gathered. gather is the
// key's resolved gather (batchGather).
func describeBatchWait(st ledger.Status, gather time.Duration, near bool) string {
	var parts []string
	if n := len(st.ProviderBatches); n > 0 {
		each := make([]string, n)
		for i, pb := range st.ProviderBatches {
			each[i] = describeProviderBatch(pb)
		}
		if n == 1 {
			parts = append(parts, "waiting for provider batch "+each[0])
		} else {
			parts = append(parts, fmt.Sprintf("waiting for %d provider batches: %s", n, strings.Join(each, "; ")))
		}
	}
	if n := st.BatchLinesUnsent; n > 0 && near {
		parts = append(parts, fmt.Sprintf("%d %s taken back for sync calls (the deadline is within auto_margin)", n, plural(n, "line", "lines")))
	} else if n > 0 {
		parts = append(parts, fmt.Sprintf("%d %s to send as a provider batch (sent once no new line has come for %s)",
			n, plural(n, "line", "lines"), gather))
	}
	return strings.Join(parts, "; ")
}

// describeProviderBatch is one provider batch in a few words: its vendor id
// (or triage's before the provider has it), its lines and its status.
func describeProviderBatch(pb ledger.ProviderBatchStatus) string {
	id := fmt.Sprintf("#%d", pb.ID)
	if pb.ProviderBatchID != nil {
		id = *pb.ProviderBatchID
	}
	lines := fmt.Sprintf("%d %s", pb.BatchLines, plural(pb.BatchLines, "line", "lines"))
	if pb.Lines > pb.BatchLines {
		lines = fmt.Sprintf("%d of %d lines", pb.BatchLines, pb.Lines)
	}
	var status string
	switch {
	case pb.State == "ended":
		status = "ended, collecting the results"
	case pb.ProviderBatchID == nil:
		status = "not submitted yet"
	case pb.VendorStatus != nil:
		status = *pb.VendorStatus
	default:
		status = "submitted"
	}
	if pb.CancelRequested {
		status += ", cancel requested"
	}
	if pb.LastError != nil {
		status += ", last request failed: " + *pb.LastError
	}
	return fmt.Sprintf("%s (%s, %s)", id, lines, status)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// fitWidth cuts line to columns runes (0: no limit), so a redrawn line
// never wraps (a wrapped line cannot be redrawn with \r).
func fitWidth(line string, columns int) string {
	if columns <= 0 {
		return line
	}
	r := []rune(line)
	if len(r) < columns {
		return line
	}
	return string(r[:columns-2]) + "…"
}

// describeState says the batch's state in words, e.g. "paused: key main
// exhausted since 02:13:05, next probe in 41s".
func describeState(st ledger.Status, ks *keys.KeyStatus) string {
	switch st.State {
	case ledger.BatchSettled:
		return "settled"
	case ledger.BatchPausedBudget:
		return "paused: the batch's budget is spent (raise it with `triage batch budget " + st.Batch + " USD`)"
	case ledger.BatchPausedExhausted:
		if ks != nil {
			return "paused: " + operator.DescribeKey(ks) + operator.OnFallback(st)
		}
		return "paused: key exhausted" + operator.OnFallback(st)
	}
	if ks == nil {
		return "running"
	}
	if why := operator.DescribeStorm(ks); why != "" {
		return "waiting: " + why
	}
	if ks.Pause != nil && ks.Pause.Until.After(ks.Now) {
		return fmt.Sprintf("throttled: key %s paused for %s", ks.Key, roundWait(ks.Pause.Until.Sub(ks.Now)))
	}
	return "running"
}

// roundWait rounds a wait for display: tenths under ten seconds, else seconds.
func roundWait(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// batchGather is how long key's submitter gathers lines before it sends
// them: the Go options' Tuning with the key's own batch_gather over it and
// the submitter's defaults under it (submitter.Tuning.WithDefaults, the one
// definition), for the progress line of a batch-mode run.
func batchGather(t submitter.Tuning, cfg *config.Config, key string) time.Duration {
	if k, err := cfg.Key(key); err == nil {
		t = t.ForKey(k)
	}
	return t.WithDefaults().Gather
}
