package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger/pgcluster"
	"github.com/triage-dev/triage/worker/workertest"
)

// gatedProvider is a provider that does not replay a repeated
// Idempotency-Key (like OpenAI and Anthropic: the header is dropped before
// the fake sees it, so every answer is billed) and holds the first calls
// until the test opens the gate, so they are in flight when it chooses.
type gatedProvider struct {
	next    http.Handler
	hold    int32
	n       atomic.Int32
	arrived chan struct{}
	gate    chan struct{}
	// t0, mu and seen: what diag logs on a failure.
	t0   time.Time
	mu   sync.Mutex
	seen []string
}

func (g *gatedProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(fakeprovider.IdempotencyHeader)
	r.Header.Del(fakeprovider.IdempotencyHeader)
	at := time.Since(g.t0)
	n := g.n.Add(1)
	if n <= g.hold {
		g.arrived <- struct{}{}
		<-g.gate
	}
	g.mu.Lock()
	g.seen = append(g.seen, fmt.Sprintf("#%d key=%s arrived=%v passed=%v ctxErr=%v", n, key, at, time.Since(g.t0), r.Context().Err()))
	g.mu.Unlock()
	g.next.ServeHTTP(w, r)
}

// heldCallTimeout is the call timeout of the worlds whose calls the
// gatedProvider holds across a database stop. The default (5s) is shorter
// than the hold can be on a loaded machine (the paced calls arriving, then
// pg_ctl stop: over 5s at load 20-30), and a call that times out there is an
// ambiguous call the provider still bills: its outcome cannot be stored with
// the database down, so its intent reads as possibly billed and the retry
// sends it again under the same Idempotency-Key, which gatedProvider strips,
// so the record is billed twice. That is the worker's documented reaction to
// an ambiguous call, not the held answer these tests are about; a timeout no
// hold reaches keeps them about the answers held.
const heldCallTimeout = "1m"

// ownCluster is a private PostgreSQL cluster for a test that stops and
// starts its database.
type ownCluster struct {
	dir string
	c   *pgcluster.Cluster
}

func newOwnCluster(t *testing.T) *ownCluster {
	t.Helper()
	oc := &ownCluster{dir: filepath.Join(t.TempDir(), "pg")}
	oc.start(t)
	t.Cleanup(func() { _ = oc.c.Remove(context.Background()) })
	return oc
}

func (oc *ownCluster) start(t *testing.T) {
	t.Helper()
	c, err := pgcluster.Start(context.Background(), oc.dir, pgcluster.Options{Fast: true})
	require.NoError(t, err)
	oc.c = c
}

func (oc *ownCluster) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, oc.c.Stop(context.Background()))
}

// blipWorld is a CLI world on its own cluster.
type blipWorld struct {
	t      *testing.T
	db     *ownCluster
	fake   *fakeprovider.Server
	config string
	envs   map[string]string
}

func newBlipWorld(t *testing.T, sc fakeprovider.Scenario, probeInterval, callTimeout string, wrap func(http.Handler) http.Handler) *blipWorld {
	t.Helper()
	w := &blipWorld{t: t, db: newOwnCluster(t)}
	sc.APIKey = cliAPIKey
	w.fake = fakeprovider.New(sc)
	t.Cleanup(func() { _ = w.fake.Close() })
	srv := httptest.NewServer(wrap(w.fake))
	t.Cleanup(srv.Close)
	w.config = filepath.Join(t.TempDir(), "triage.toml")
	require.NoError(t, os.WriteFile(w.config, []byte(workertest.Config(workertest.ConfigOptions{BaseURL: srv.URL + "/v1", ProbeInterval: probeInterval, Timeout: callTimeout})), 0o600))
	w.envs = map[string]string{"DATABASE_URL": w.db.c.URL(), workertest.APIKeyEnv: cliAPIKey}
	r := w.run(context.Background(), nil, "migrate")
	require.Equal(t, exitOK, r.code, r.stderr)
	return w
}

func (w *blipWorld) run(ctx context.Context, stderr *workertest.Buffer, args ...string) result {
	var out bytes.Buffer
	if stderr == nil {
		stderr = &workertest.Buffer{}
	}
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: stderr, getenv: func(k string) string { return w.envs[k] }}
	code := run(ctx, append([]string{"--config", w.config}, args...), e)
	return result{code: code, stdout: out.String(), stderr: stderr.String()}
}

// start runs `triage args...` on a goroutine of its own: its result comes on
// the channel, its stderr is readable as it is written.
func (w *blipWorld) start(args ...string) (<-chan result, *workertest.Buffer) {
	stderr := &workertest.Buffer{}
	done := make(chan result, 1)
	go func() { done <- w.run(context.Background(), stderr, args...) }()
	return done, stderr
}

// held waits until the provider holds its calls (hold of them have
// arrived), failing if the command ends first.
func (g *gatedProvider) held(t *testing.T, done <-chan result) {
	t.Helper()
	for range g.hold {
		select {
		case <-g.arrived:
		case r := <-done:
			t.Fatalf("the command ended before its calls were in flight: %d\n%s", r.code, r.stderr)
		}
	}
}

// ended is the command's result once it ends; what says what the test
// waited for if it does not within two minutes.
func ended(t *testing.T, done <-chan result, stderr *workertest.Buffer, what string) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s:\n%s", what, stderr.String())
		return result{}
	}
}

// jobs counts the River jobs in the states.
func (w *blipWorld) jobs(t *testing.T, states ...string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), w.db.c.URL())
	if err != nil {
		return -1
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM river_job WHERE state::text = ANY($1)", states).Scan(&n); err != nil {
		return -1
	}
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 90*time.Second, 20*time.Millisecond, what)
}

// A database restart under a running `triage run` with calls in flight:
// the answers that arrive while it is down are held and stored when it is
// back, the run completes, and no record is bought twice.
func TestRunRidesOutADatabaseRestart(t *testing.T) {
	t.Parallel()
	g := &gatedProvider{hold: 4, arrived: make(chan struct{}, 4), gate: make(chan struct{}), t0: time.Now()}
	w := newBlipWorld(t, fakeprovider.Scenario{}, "", heldCallTimeout, func(h http.Handler) http.Handler { g.next = h; return g })
	in := filepath.Join(t.TempDir(), "in.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(workertest.JSONL(8)), 0o600))

	done, stderr := w.start("run", "--pipeline", "enrich", "--batch", "blip", "--progress-interval", "100ms", in)
	diag(t, g, w, stderr)
	g.held(t, done)
	w.db.stop(t) // four calls in flight
	close(g.gate)
	waitFor(t, "the four answers are delivered (and billed) while the database is down", func() bool {
		return w.fake.Stats().BilledCalls >= 4
	})
	waitFor(t, "run says the database is unreachable", func() bool {
		return strings.Contains(stderr.String(), "database unreachable, retrying")
	})
	w.db.start(t)

	r := ended(t, done, stderr, "run did not finish after the database came back")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "8 records, 8 completed, 0 dead-lettered, 0 pending")
	require.Contains(t, r.stderr, "database reachable again")
	require.Equal(t, 1, strings.Count(r.stderr, "database unreachable, retrying"), "one notice, not one per poll")
	require.LessOrEqual(t, strings.Count(r.stderr, "ERROR"), 12, "River's reconnect errors are summarised:\n%s", r.stderr)
	st := w.fake.Stats()
	require.Zero(t, st.DoubleBilledRecords, "no record billed twice")
	require.Equal(t, 8, st.BilledCalls, "each record bought once")
}

// A sustained outage: run stops with exit 4, says the jobs are safe and how
// to finish them, and `triage work --exit-when-idle` does, billing nothing
// twice.
func TestRunStopsWithExit4WhenTheDatabaseStaysAway(t *testing.T) {
	t.Parallel()
	// A probe interval longer than the test: once the key is exhausted no
	// job runs, so none is left running (for River's rescuer) by the stop.
	w := newBlipWorld(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}}, "10m", "",
		func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				r.Header.Del(fakeprovider.IdempotencyHeader)
				h.ServeHTTP(rw, r)
			})
		})
	in := filepath.Join(t.TempDir(), "in.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(workertest.JSONL(5)), 0o600))

	done, stderr := w.start("run", "--pipeline", "enrich", "--batch", "away", "--db-wait", "1s", in)
	waitFor(t, "the key is exhausted and its jobs parked", func() bool {
		return strings.Contains(stderr.String(), "key main exhausted") && w.jobs(t, "available", "scheduled") == 5
	})
	w.db.stop(t)
	r := ended(t, done, stderr, "run did not stop")
	require.Equal(t, exitQueued, r.code, r.stderr)
	require.Contains(t, r.stderr, "database unreachable, retrying")
	require.Contains(t, r.stderr, "unreachable for 1s")
	require.Contains(t, r.stderr, "safe in the queue")
	require.Contains(t, r.stderr, "triage work --exit-when-idle")

	w.db.start(t)
	w.fake.TopUp(10)
	r = w.run(context.Background(), nil, "keys", "resume", "main")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = w.run(context.Background(), nil, "work", "--exit-when-idle")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = w.run(context.Background(), nil, "status", "away", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"completed":5`)
	st := w.fake.Stats()
	require.Zero(t, st.DoubleBilledRecords)
	require.Equal(t, 5, st.BilledCalls)
}

// The same restart under `triage work --exit-when-idle`: it holds the
// answers, keeps looking for work through the outage, and finishes the
// queue without buying anything twice.
func TestWorkRidesOutADatabaseRestart(t *testing.T) {
	t.Parallel()
	g := &gatedProvider{hold: 4, arrived: make(chan struct{}, 4), gate: make(chan struct{}), t0: time.Now()}
	w := newBlipWorld(t, fakeprovider.Scenario{}, "", heldCallTimeout, func(h http.Handler) http.Handler { g.next = h; return g })
	in := filepath.Join(t.TempDir(), "in.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(workertest.JSONL(6)), 0o600))
	r := w.run(context.Background(), nil, "enqueue", "--pipeline", "enrich", "--batch", "w1", in)
	require.Equal(t, exitOK, r.code, r.stderr)

	done, stderr := w.start("work", "--exit-when-idle")
	diag(t, g, w, stderr)
	g.held(t, done)
	w.db.stop(t)
	close(g.gate)
	waitFor(t, "work holds the answers that arrived while the database is down", func() bool {
		return strings.Count(stderr.String(), "holding the answer") >= 1
	})
	w.db.start(t)
	r = ended(t, done, stderr, "work did not finish after the database came back")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "answer stored after the database came back")
	r = w.run(context.Background(), nil, "status", "w1", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"completed":6`)
	st := w.fake.Stats()
	require.Zero(t, st.DoubleBilledRecords, "no record billed twice")
	require.Equal(t, 6, st.BilledCalls)
}

// diag logs, if the test failed, what the provider saw: each call's
// Idempotency-Key and when it arrived and passed the gate, each record's
// bills, and the command's stderr.
func diag(t *testing.T, g *gatedProvider, w *blipWorld, stderr *workertest.Buffer) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		g.mu.Lock()
		for _, l := range g.seen {
			t.Logf("provider saw: %s", l)
		}
		g.mu.Unlock()
		for rec, rs := range w.fake.Stats().ByRecord {
			t.Logf("record %.12s billed=%d statuses=%v actions=%v", rec, rs.Billed, rs.Statuses, rs.Actions)
		}
		t.Logf("stderr:\n%s", stderr.String())
	})
}
