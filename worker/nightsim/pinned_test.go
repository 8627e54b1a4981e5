package nightsim_test

import (
	"testing"
	"time"

	"github.com/triage-dev/triage/worker/nightsim"
)

// Nights pinned by hand: each the smallest night that showed a fault, run
// when its switch is on (after the fix is merged), so the fault stays
// found.
func TestNightPinned(t *testing.T) {
	sw := switches()
	pinned := []struct {
		name string
		on   bool
		n    nightsim.Night
	}{{
		// Fault 3: a cut stream accepted as a partial is cached as a whole
		// answer; the copies of its record get it unmarked.
		name: "fault3_partial_cached", on: sw.PartialCache,
		n: nightsim.Night{Seed: 99, Procs: 1, Child: -1, Vendor: "openai", Mode: "sync", Output: "text", Concurrency: 2,
			Cache: true, Stream: true, AcceptPartial: 5, Overflow: "dead_letter", MaxAge: 12 * time.Second, Records: 60,
			Latency: 20 * time.Millisecond, PoisonEvery: 10, Length: 3 * time.Second,
			Events: []nightsim.Event{{At: 0, Kind: nightsim.FlakyOn, Action: "cut_stream", P: 0.5}}},
	}, {
		// Fault 6 (seed 3020 of the first soak, its whole schedule): the
		// primary's balance runs out and is topped up two seconds later;
		// the fallback on another vendor gets no call, 81 of 86 records
		// end snoozed_out and the key stays open with its probe overdue.
		name: "fault6_fallback_exhausted", on: sw.FallbackExhausted,
		n: nightsim.Night{Seed: 3020, Procs: 1, Child: -1, Vendor: "openai", Mode: "sync", Output: "json", Concurrency: 3,
			Stream: true, BudgetUSD: 0.007, Fallback: "anthropic", Overflow: "truncate", MaxAge: 12 * time.Second, Records: 86,
			Latency: 48 * time.Millisecond, PoisonEvery: 16, BatchLatency: 2326 * time.Millisecond, Length: 3655 * time.Millisecond,
			Events: []nightsim.Event{
				{At: 350 * time.Millisecond, Kind: nightsim.Operate, Op: nightsim.OpResume},
				{At: 370 * time.Millisecond, Kind: nightsim.BalanceLow},
				{At: 390 * time.Millisecond, Kind: nightsim.RateOn},
				{At: 970 * time.Millisecond, Kind: nightsim.RateOff},
				{At: 1470 * time.Millisecond, Kind: nightsim.Operate, Op: nightsim.OpRequeue},
				{At: 2010 * time.Millisecond, Kind: nightsim.FlakyOn, Action: "hang", P: 0.13},
				{At: 2510 * time.Millisecond, Kind: nightsim.TopUp, USD: 1},
				{At: 2550 * time.Millisecond, Kind: nightsim.FlakyOff},
				{At: 3220 * time.Millisecond, Kind: nightsim.FallbackDown},
				{At: 3290 * time.Millisecond, Kind: nightsim.Operate, Op: nightsim.OpCancelJobs},
				{At: 3590 * time.Millisecond, Kind: nightsim.FallbackUp},
			}},
	}, {
		// Seed 30029 of the soak with every switch on, its whole schedule:
		// a job refused while the probe was out parked for the probe's
		// lease (3 min); the wake of the close (`keys resume` woke 0, or
		// the probe after the top-up) came before River recorded that
		// snooze, so the job sat out the key's recovery and its 12 s max
		// age, and the batch did not settle within 90 s.
		name: "breaker_park_past_resume", on: true,
		n: nightsim.Night{Seed: 30029, Procs: 1, Child: -1, Vendor: "anthropic", Mode: "sync", Output: "json", Concurrency: 5,
			Stream: true, Overflow: "truncate", EchoKey: true, MaxAge: 12 * time.Second, Records: 69,
			Latency: 49 * time.Millisecond, PoisonEvery: 9, BatchLatency: 3040 * time.Millisecond, Length: 2612 * time.Millisecond,
			Events: []nightsim.Event{
				{At: 640 * time.Millisecond, Kind: nightsim.Operate, Op: nightsim.OpRequeue},
				{At: 984 * time.Millisecond, Kind: nightsim.TopUp, USD: 1},
				{At: 2119 * time.Millisecond, Kind: nightsim.BalanceLow, USD: 0.00005},
				{At: 2359 * time.Millisecond, Kind: nightsim.RateOn},
				{At: 2491 * time.Millisecond, Kind: nightsim.Operate, Op: nightsim.OpResume},
				{At: 2600 * time.Millisecond, Kind: nightsim.RateOff},
			}},
	}, {
		// Found by reading (issue 19): River jobs cancelled by hand while
		// their lines are in a live provider batch; the provider answers
		// and bills them; the requeue that follows sent the records again
		// (the paid answers had been dropped), each paid twice.
		name: "cancelled_line_requeued", on: true,
		n: nightsim.Night{Seed: 19001, Procs: 1, Child: -1, Vendor: "openai", Mode: "batch", Output: "json", Concurrency: 4,
			Overflow: "dead_letter", MaxAge: 40 * time.Second, Records: 60, Latency: 30 * time.Millisecond, PoisonEvery: 9,
			BatchLatency: 1500 * time.Millisecond, Length: 5 * time.Second,
			Events: []nightsim.Event{
				{At: 1800 * time.Millisecond, Kind: nightsim.Operate, Op: nightsim.OpCancelJobs},
				{At: 4500 * time.Millisecond, Kind: nightsim.Operate, Op: nightsim.OpRequeue},
			}},
	}, {
		// Seed 14744 (its whole schedule; found while looking for a night
		// of the cancelled lines above, the same fault as nights 30076 and
		// 30102): the only process is killed before its lines went into a
		// provider batch and comes back with the pipeline in sync mode; the
		// jobs slept out their batch wait (an hour) with their lines
		// pending.
		name: "seed14744_switched_to_sync_unsent", on: true,
		n: nightsim.Night{Seed: 14744, Procs: 1, Child: -1, Vendor: "anthropic", Mode: "batch", Output: "json", Concurrency: 4,
			Overflow: "dead_letter", EchoKey: true, MaxAge: 40 * time.Second, Records: 83, Latency: 54 * time.Millisecond,
			PoisonEvery: 9, BatchLatency: 1265 * time.Millisecond, Length: 4374 * time.Millisecond,
			Events: []nightsim.Event{
				{At: 140 * time.Millisecond, Kind: nightsim.Operate, Op: nightsim.OpRequeue},
				{At: 1010 * time.Millisecond, Kind: nightsim.Kill, Proc: 0},
				{At: 1800 * time.Millisecond, Kind: nightsim.Operate, Op: nightsim.OpCancelJobs},
				{At: 3570 * time.Millisecond, Kind: nightsim.Start, Proc: 0, Mode: "sync"},
				{At: 3870 * time.Millisecond, Kind: nightsim.Operate, Op: nightsim.OpRequeue},
			}},
	}}
	for _, p := range pinned {
		if !p.on {
			t.Logf("%s: its switch is off", p.name)
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			nightRun(t, p.n)
		})
	}
}
