package nightsim_test

import (
	"flag"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triage-dev/triage/worker/nightsim"
)

// fixedSeeds are the nights `make test` runs, chosen so that together
// they draw every mode and vendor, a fallback, streams, the cache, batch
// expiry, a spent balance, a SIGKILLed child, stops, kills, a database
// blip and every operator action (docs/night-simulator.md lists them).
// Nights whose balance never returns are left to the soak: they wait
// for MaxAge; 160165 is one with a short MaxAge (12 s), kept because it
// is the sync night switched to batch mode as the balance runs out, which
// invariant 5 once counted against the fleet.
var fixedSeeds = []int64{3, 7, 9, 11, 12, 15, 34, 87, 160165}

var (
	seedFlag     = flag.Int64("seed", -1, "replay one night by its seed (also NIGHTSIM_SEED)")
	seedsFlag    = flag.Int("seeds", 0, "run this many nights from -first (also NIGHTSIM_SEEDS): the soak")
	firstFlag    = flag.Int64("first", 1000, "the first seed of -seeds (also NIGHTSIM_FIRST)")
	soakFlag     = flag.Duration("soak", 0, "run nights from -first until this much time has passed (also NIGHTSIM_SOAK_TIME)")
	parallelFlag = flag.Int("nights", 4, "nights run side by side (also NIGHTSIM_PARALLEL)")
	allFlag      = flag.Bool("all", false, "turn on every dimension, those of faults being fixed too (also NIGHTSIM_ALL=1)")
)

func envInt(name string, def int64) int64 {
	if s := os.Getenv(name); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("%s=%q: not a number", name, s))
		}
		return n
	}
	return def
}

func switches() nightsim.Switches {
	if *allFlag || os.Getenv("NIGHTSIM_ALL") == "1" {
		return nightsim.All
	}
	return nightsim.Known
}

// settleBound is how long the fleet may take to settle once the faults
// end: a job parked until MaxAge, backoffs and a rescue after a kill fit.
const settleBound = 90 * time.Second

// TestNight plays seeded nights against the fake provider and PostgreSQL
// and checks what a user cares about afterwards. A failing night prints
// its seed, its configuration and schedule, what happened, and the
// invariants it broke; -seed=N replays the same configuration and
// schedule.
func TestNight(t *testing.T) {
	seed := envInt("NIGHTSIM_SEED", *seedFlag)
	seeds := envInt("NIGHTSIM_SEEDS", int64(*seedsFlag))
	first := envInt("NIGHTSIM_FIRST", *firstFlag)
	soak := *soakFlag
	if s := os.Getenv("NIGHTSIM_SOAK_TIME"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("NIGHTSIM_SOAK_TIME=%q: %v", s, err)
		}
		soak = d
	}
	sw := switches()
	width := int(envInt("NIGHTSIM_PARALLEL", int64(*parallelFlag)))
	switch {
	case seed >= 0:
		nights(t, width, func(yield func(int64) bool) { yield(seed) }, sw)
	case soak > 0:
		end := time.Now().Add(soak)
		nights(t, width, func(yield func(int64) bool) {
			for s := first; time.Now().Before(end) && yield(s); s++ {
			}
		}, sw)
	case seeds > 0:
		nights(t, width, func(yield func(int64) bool) {
			for s := first; s < first+seeds && yield(s); s++ {
			}
		}, sw)
	default:
		nights(t, width, slices.Values(fixedSeeds), sw)
	}
}

// nights runs the nights of seeds, width at a time. A night mostly waits
// on its schedule and its fleet, so more run side by side than there are
// cores; subtests run from goroutines are not bound by -parallel.
func nights(t *testing.T, width int, seeds iter.Seq[int64], sw nightsim.Switches) {
	sem := make(chan struct{}, max(1, width))
	var wg sync.WaitGroup
	for s := range seeds {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			night(t, nightsim.Plan(s, sw))
		}()
	}
	wg.Wait()
}

// night runs one night as a subtest.
func night(t *testing.T, n nightsim.Night) {
	t.Run(fmt.Sprintf("seed=%d", n.Seed), func(t *testing.T) { nightRun(t, n) })
}

// nightRun plays n and fails t with the night and what it broke.
func nightRun(t *testing.T, n nightsim.Night) {
	t.Log(n)
	w := newWorld(t, n)
	bound := settleBound
	if n.NoTopUp {
		// Jobs parked on a key whose balance never returns are
		// dead-lettered once past their MaxAge (the supervisor moves them
		// to the probe queue; before session 7 they ran only as the probe,
		// one at a time, and this bound still allows for that).
		bound += n.MaxAge + time.Duration(n.Records)*probeInterval + 2*time.Minute
	}
	// A process whose clock is off writes a breaker's opening and next
	// probe by its clock, and the fleet waits until then: the skew longer
	// (seed 7020: +3m, exhausted, the last jobs parked 97 s past the bound
	// without it; seed 60287: +9m, a storm breaker opened "9 minutes from
	// now" held the key past the bound).
	bound += n.Skew.Abs()
	ok := w.run(bound)
	var v []string
	if !ok {
		v = append(v, w.stuck()...)
	} else {
		v = w.check()
	}
	if testing.Verbose() {
		t.Logf("what happened:\n  %s\n  %s", strings.Join(w.notes, "\n  "), strings.Join(w.diagnose(), "\n  "))
	}
	if d := os.Getenv("NIGHTSIM_DUMP"); d != "" {
		// The in-process workers' logs, at debug level, for a replay.
		if err := os.WriteFile(d, []byte(w.logs.String()), 0o644); err != nil {
			t.Errorf("NIGHTSIM_DUMP: %v", err)
		}
	}
	if d := os.Getenv("NIGHTSIM_FAILED_LOGS"); d != "" && len(v) > 0 {
		// A soak keeps the logs of the nights that broke: most of them
		// replay green, so the first run's logs are all there is.
		p := filepath.Join(d, fmt.Sprintf("night-%d.jsonl", n.Seed))
		if err := os.WriteFile(p, []byte(w.logs.String()), 0o644); err != nil {
			t.Errorf("NIGHTSIM_FAILED_LOGS: %v", err)
		} else {
			t.Logf("the workers' logs of this night: %s", p)
		}
	}
	if len(v) > 0 {
		t.Fatalf("%s\nwhat happened:\n  %s\nbroken:\n  - %s", n, strings.Join(w.notes, "\n  "), strings.Join(v, "\n  - "))
	}
}
