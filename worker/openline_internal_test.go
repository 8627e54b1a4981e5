package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
)

// TestDecideBeforeOpenLine pins the open-line rule in the one decision
// every path asks (a job's run, the fallback mover): a live line waits for
// its answer whatever else holds; a paid answer is applied rather than
// the record ended or moved; an unsent line does not hold the record.
func TestDecideBeforeOpenLine(t *testing.T) {
	t.Parallel()
	const wait = time.Hour
	grace := time.Minute
	openFor := time.Hour
	fb := fallbackInput{Model: &config.Model{Name: "fb"}, OpenFor: &openFor, Grace: grace}
	exhausted := &keys.Admission{Wait: 30 * time.Second, State: keys.StateOpen, Breaker: keys.BreakerExhausted}
	allowed := &keys.Admission{Allowed: true, State: keys.StateClosed}
	with := func(line ledger.LineHold, f func(b *before)) before {
		b := job()
		b.Line, b.LineWait = line, wait
		f(&b)
		return b
	}
	pastRuns := func(b *before) { b.Attempt = 50 }
	tooOld := func(b *before) { b.Age = 48 * time.Hour }
	snoozedOut := func(b *before) { b.OwnSnoozes = 100 }
	openKey := func(b *before) { b.Admission, b.Fallback = exhausted, fb }
	callsUsed := func(b *before) { b.Admission, b.Prior = allowed, &ledger.Prior{JobCalls: 6, JobAmbiguous: 3} }
	park := Reaction{Kind: ReactPark, After: wait}
	tests := []struct {
		name string
		in   before
		want ReactionKind
	}{
		{"live line, past its runs: waits", with(ledger.HoldLive, pastRuns), ReactPark},
		{"live line, too old: waits", with(ledger.HoldLive, tooOld), ReactPark},
		{"live line, snoozed out: waits", with(ledger.HoldLive, snoozedOut), ReactPark},
		{"live line, key open past the grace: not moved", with(ledger.HoldLive, openKey), ReactPark},
		{"answered, past its runs: applied", with(ledger.HoldAnswered, pastRuns), ReactGo},
		{"answered, too old: applied", with(ledger.HoldAnswered, tooOld), ReactGo},
		{"answered, snoozed out: applied", with(ledger.HoldAnswered, snoozedOut), ReactGo},
		{"answered, calls used up: applied", with(ledger.HoldAnswered, callsUsed), ReactGo},
		{"answered, key open past the grace: parks with its key, not moved", with(ledger.HoldAnswered, openKey), ReactPark},
		{"unsent, key open past the grace: moves (taking the line back)", with(ledger.HoldUnsent, openKey), ReactFallback},
		{"unsent, past its runs: dead-lettered (taking the line back)", with(ledger.HoldUnsent, pastRuns), ReactDeadLetter},
		{"no line, too old: dead-lettered", with(ledger.HoldNone, tooOld), ReactDeadLetter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := decideBefore(tt.in)
			require.Equal(t, tt.want, got.Kind, "%s", got)
			if tt.in.Line == ledger.HoldLive {
				require.Equal(t, park, got)
			}
		})
	}
}

// TestLineHold pins which line states hold a record.
func TestLineHold(t *testing.T) {
	t.Parallel()
	for state, want := range map[string]ledger.LineHold{
		ledger.LinePending: ledger.HoldUnsent, ledger.LineNotRun: ledger.HoldUnsent,
		ledger.LineSubmitted: ledger.HoldLive, ledger.LineAnswered: ledger.HoldAnswered, ledger.LineApplied: ledger.HoldNone,
	} {
		require.Equal(t, want, ledger.BatchLine{ID: 1, State: state}.Hold(), state)
	}
	require.Equal(t, ledger.HoldNone, ledger.BatchLine{State: ledger.LineSubmitted}.Hold(), "no line")
}
