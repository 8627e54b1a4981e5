package console_test

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/console"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/workertest"
)

// testBundle is one console on its own schema, with a fake provider.
type testBundle struct {
	db   *dbtest.DB
	cfg  *config.Config
	fake *fakeprovider.Server
	url  string
	logs *workertest.Buffer
	rc   *river.Client[pgx.Tx]
}

type setupOpts struct {
	scenario fakeprovider.Scenario
	token    string
	// timeout and extraKey are the key's, as workertest.ConfigOptions's.
	timeout  string
	extraKey string
	// reloadAtOnce makes every page that reloads itself do so as soon as
	// it has loaded (its meta refresh rewritten to 0 s): a browser test
	// then meets, on every step, the self-reload that a loaded CI machine
	// lands on now and then.
	reloadAtOnce bool
}

func setup(t *testing.T, o setupOpts) *testBundle {
	t.Helper()
	db := dbtest.New(t, dbtest.Options{MaxConns: 20})
	o.scenario.APIKey = workertest.APIKey
	fake, baseURL := workertest.Provider(t, o.scenario)
	cfg, err := config.Parse([]byte(workertest.Config(workertest.ConfigOptions{BaseURL: baseURL, MaxAttempts: 2,
		Timeout: o.timeout, ExtraKey: o.extraKey})), "test.toml")
	require.NoError(t, err)
	logs := &workertest.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	srv, err := console.New(console.Options{Pool: db.Pool, Schema: db.Schema, Config: cfg, Logger: log, Token: o.token, Refresh: 2 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, srv.Start(ctx))
	var h http.Handler = srv
	if o.reloadAtOnce {
		h = reloadAtOnce(srv)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() { hs.Close(); cancel() })
	rc, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{Schema: db.Schema})
	require.NoError(t, err)
	return &testBundle{db: db, cfg: cfg, fake: fake, url: hs.URL, logs: logs, rc: rc}
}

// enqueue queues records as batch.
func (b *testBundle) enqueue(t *testing.T, batch string, recs []ledger.Record) {
	t.Helper()
	require.NoError(t, enqueue.Batch(context.Background(), b.db.Pool, b.db.Schema, b.cfg,
		enqueue.Params{Pipeline: workertest.Pipeline, Batch: batch, Records: recs}))
}

// work runs a worker until the batches settle, then stops it.
func (b *testBundle) work(t *testing.T, batches ...string) {
	t.Helper()
	opts := workertest.WorkerOptions(b.cfg, b.db.Schema)
	opts.Pool = b.db.Pool
	rt, err := worker.New(opts)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, rt.Start(ctx))
	for _, batch := range batches {
		workertest.WaitSettled(t, b.db.Pool, batch, time.Minute)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, rt.Stop(stopCtx))
}

// jobsOf counts the River jobs of a batch's record, in any state.
func (b *testBundle) jobsOf(t *testing.T) map[string]int {
	t.Helper()
	res, err := b.rc.JobList(context.Background(), river.NewJobListParams().States(
		rivertype.JobStateAvailable, rivertype.JobStateCancelled, rivertype.JobStateCompleted, rivertype.JobStateDiscarded,
		rivertype.JobStatePending, rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled).First(10000))
	require.NoError(t, err)
	out := map[string]int{}
	for _, j := range res.Jobs {
		a := jobargs.Args{}
		require.NoError(t, unmarshal(j.EncodedArgs, &a))
		out[a.Batch+"/"+a.RecordID]++
	}
	return out
}

// tripKey opens the key's exhausted breaker, as an insufficient_quota answer would.
func (b *testBundle) tripKey(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	store := keys.DefaultStore(b.db.Pool)
	adm, err := store.Admit(ctx, workertest.Key, 0)
	require.NoError(t, err)
	_, err = store.Trip(ctx, workertest.Key, adm, "insufficient_quota", time.Hour)
	require.NoError(t, err)
}

// selfReload is a page's meta refresh, as layout.html writes it.
var selfReload = regexp.MustCompile(`<meta http-equiv="refresh" content="\d+">`)

// reloadAtOnce rewrites the self-reload of the pages h serves to 0 s. The
// pages are rendered whole before they are written (Server.render), so the
// rewrite buffers nothing that was streamed.
func reloadAtOnce(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			body = selfReload.ReplaceAll(body, []byte(`<meta http-equiv="refresh" content="0">`))
		}
		maps.Copy(w.Header(), rec.Header())
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}
