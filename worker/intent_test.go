package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/workertest"
)

// A first send's intent is written with the prior read, in the admission's
// round trip, before the run has decided to call. Every run that ends
// without sending withdraws it: no attempt row of such a run stays open,
// where `triage ledger --calls` and the next run would count it as a call
// that got no answer (possibly billed), and the provider gets no request.
func TestIntentWithdrawnWhenTheRunDoesNotSend(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		cache bool
		// configure sets the options of the runtime; hold runs on it before
		// it starts, arrange once it runs, before the batch b1 is enqueued.
		configure func(b *testBundle)
		hold      func(t *testing.T, rt *worker.Runtime)
		arrange   func(t *testing.T, b *testBundle)
		// ended says the runs of b1 have ended at their exit (the job parked,
		// or the batch settled).
		ended func(t *testing.T, b *testBundle) bool
		// intents: the runs wrote their intent with the admission (the
		// exit withdraws it); otherwise the run had to wait for its pace,
		// or the cache may answer it, and writes none before the call.
		intents bool
	}{{
		name: "refused by an open breaker",
		configure: func(b *testBundle) {
			// One reconcile at start and none after: the queue is not paused
			// when the breaker opens, so the job is fetched and refused.
			b.opts.SupervisorTick = time.Hour
		},
		arrange: func(t *testing.T, b *testBundle) {
			ctx := context.Background()
			// A record worked end to end first: the supervisor's one
			// reconcile has run by then.
			b.enqueue(t, "b0", records(1, nil))
			b.waitSettled(t, "b0", 20*time.Second)
			store := keys.DefaultStore(b.db.Pool)
			adm, err := store.Admit(ctx, workertest.Key, 0)
			require.NoError(t, err)
			tripped, err := store.Trip(ctx, workertest.Key, adm, "test", 0)
			require.NoError(t, err)
			require.True(t, tripped)
			probe, err := store.Admit(ctx, workertest.Key, 1<<40)
			require.NoError(t, err)
			require.True(t, probe.Probe, "another job holds the probe claim")
		},
		ended:   parkedOnce,
		intents: true,
	}, {
		name:      "the key paused fleet-wide",
		configure: func(b *testBundle) { b.opts.SupervisorTick = time.Hour },
		arrange: func(t *testing.T, b *testBundle) {
			b.enqueue(t, "b0", records(1, nil))
			b.waitSettled(t, "b0", 20*time.Second)
			_, err := keys.DefaultStore(b.db.Pool).PauseFor(context.Background(), workertest.Key, keys.PauseThrottled, time.Hour)
			require.NoError(t, err)
		},
		ended:   parkedOnce,
		intents: true,
	}, {
		name:      "parked by a pace wait beyond its bound",
		configure: func(b *testBundle) { b.opts.Pacing = keys.PacerConfig{InitialRate: 1.0 / 3600} },
		hold: func(t *testing.T, rt *worker.Runtime) {
			// One call an hour, and the test takes the one free slot: the
			// job's wait is far beyond its bound, so it parks.
			require.NoError(t, rt.PacerOf(workertest.Key).Wait(context.Background(), 1, 0))
		},
		ended: parkedOnce,
	}, {
		name:  "answered from the response cache",
		cache: true,
		arrange: func(t *testing.T, b *testBundle) {
			b.enqueue(t, "b0", records(3, nil))
			b.waitSettled(t, "b0", 20*time.Second)
		},
		ended: func(t *testing.T, b *testBundle) bool { return b.status(t, "b1").Completed == 3 },
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tw := tweaks{probeInterval: "1h"}
			if tc.cache {
				tw.extraPipeline = "cache = true\n"
			}
			b := setup(t, fakeprovider.Scenario{NoReplay: true}, tw)
			if tc.configure != nil {
				tc.configure(b)
			}
			rt := b.newRuntime(t)
			if tc.hold != nil {
				tc.hold(t, rt)
			}
			b.run(t, rt)
			if tc.arrange != nil {
				tc.arrange(t, b)
			}
			base, seq := b.fake.Stats().Requests, attemptSeq(t, b)
			b.enqueue(t, "b1", records(3, nil))
			eventually(t, 30*time.Second, "the runs end without a call", func() bool { return tc.ended(t, b) })
			// Stopped, no run is between its admission and its exit.
			stop, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			require.NoError(t, rt.Stop(stop))

			require.Equal(t, base, b.fake.Stats().Requests, "no request reached the provider")
			var open int
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM triage_attempt
				WHERE batch = 'b1' AND status IN ('intent', 'possibly_billed')`).Scan(&open))
			require.Zero(t, open, "no attempt left open by a run that did not send")
			st := b.status(t, "b1")
			require.Zero(t, st.PossiblyBilledUSD)
			atts, err := ledger.ListAttempts(ctx, b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
			require.NoError(t, err)
			for _, a := range atts {
				require.Equal(t, ledger.AttemptOK, a.Status, "only cache hits are attempts")
				require.Equal(t, ledger.ReasonCacheHit, *a.Reason)
			}
			if !tc.cache {
				require.Empty(t, atts)
			}
			if tc.intents {
				require.Greater(t, attemptSeq(t, b), seq+int64(len(atts)), "the runs wrote intents with their admission")
			}
		})
	}
}

// parkedOnce: every job of b1 has parked at least once (River records the
// park after the run returned).
func parkedOnce(t *testing.T, b *testBundle) bool {
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE args->>'batch' = 'b1' AND (metadata->>'triage_parked')::int > 0`).Scan(&n))
	return n == 3
}

// attemptSeq is the last attempt id handed out: it moves with every
// intent written, withdrawn or not.
func attemptSeq(t *testing.T, b *testBundle) int64 {
	var n int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT coalesce((SELECT last_value FROM pg_sequences WHERE sequencename = 'triage_attempt_id_seq' AND schemaname = current_schema()), 0)`).Scan(&n))
	return n
}
