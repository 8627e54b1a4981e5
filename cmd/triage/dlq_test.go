package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/workertest"
)

// dlqListKeys and dlqShowKeys are the contract's JSON key sets.
var (
	dlqListKeys = []string{"attempts", "batch", "class", "code", "created_at", "id", "reason", "record_id", "status", "suspect"}
	dlqShowKeys = append([]string{"calls", "error_excerpt", "job_id", "key", "known", "partial", "pipeline", "record", "request", "requeued_at", "rule"}, dlqListKeys...)
)

func dlqKeySet(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func dlqSorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

// dlqListJSON runs `dlq list --json args...` and decodes the array.
func dlqListJSON(t *testing.T, c *cli, args ...string) []map[string]any {
	t.Helper()
	r := c.run("", append([]string{"dlq", "list", "--json"}, args...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &items), r.stdout)
	require.NotNil(t, items, "an empty list is [], not null")
	for _, it := range items {
		require.Equal(t, dlqListKeys, dlqKeySet(it))
	}
	return items
}

// dlqRewriteConfig replaces old with new in the test's triage.toml.
func dlqRewriteConfig(t *testing.T, c *cli, old, new string) {
	t.Helper()
	b, err := os.ReadFile(c.config)
	require.NoError(t, err)
	require.Contains(t, string(b), old)
	require.NoError(t, os.WriteFile(c.config, []byte(strings.Replace(string(b), old, new, 1)), 0o600))
}

// dlqStartWorker runs a worker process with the test's current triage.toml on
// its own pool and returns a function that stops it.
func dlqStartWorker(t *testing.T, c *cli) (stop func()) {
	t.Helper()
	cfg, err := config.Load(c.config)
	require.NoError(t, err)
	pool, err := pgxpool.New(context.Background(), c.db.URL)
	require.NoError(t, err)
	rt, err := worker.New(worker.Options{
		Config: cfg, Pool: pool,
		Getenv:            func(k string) string { return c.envs[k] },
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		BackoffBase:       10 * time.Millisecond,
		BackoffCap:        100 * time.Millisecond,
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		SupervisorTick:    25 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, rt.Start(context.Background()))
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Stop(ctx)
		pool.Close()
	}
	t.Cleanup(stop)
	return stop
}

// dlqWaitSettled polls the batch until every record is completed or
// dead-lettered, or fails the test at the deadline.
func dlqWaitSettled(t *testing.T, c *cli, batch string, timeout time.Duration) ledger.Status {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := ledger.BatchStatus(context.Background(), c.db.Pool, batch)
		require.NoError(t, err)
		if st.Completed+st.DeadLettered == st.Total {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s did not settle within %s: %+v", batch, timeout, st)
		}
		<-tick.C
	}
}

func dlqBatchStatusOf(t *testing.T, c *cli, batch string) ledger.Status {
	t.Helper()
	st, err := ledger.BatchStatus(context.Background(), c.db.Pool, batch)
	require.NoError(t, err)
	return st
}

// dlqRiverJobs counts River jobs of the batch by state.
func dlqRiverJobs(t *testing.T, c *cli, batch, state string) int {
	t.Helper()
	var n int
	require.NoError(t, c.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE args->>'batch' = $1 AND state::text = $2`, batch, state).Scan(&n))
	return n
}

// TestDLQMorningInspection is the third use in docs/design.md ("What it is for"), end to end on the real
// path: a prompt that the provider rejects dead-letters every record; after
// the prompt is fixed, requeue sends them back built from the new
// configuration and they complete. A second requeue requeues nothing.
func TestDLQMorningInspection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCLI(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, "")
	const goodPrompt = `prompt = "Record: {{json .}}"`
	dlqRewriteConfig(t, c, goodPrompt, `prompt = "Record: {{json .}} POISON"`)

	cfg, err := config.Load(c.config)
	require.NoError(t, err)
	recs, err := enqueue.ReadJSONL(strings.NewReader(jsonl(3)), "in.jsonl")
	require.NoError(t, err)
	require.NoError(t, enqueue.Batch(ctx, c.db.Pool, "", cfg, enqueue.Params{Pipeline: "enrich", Batch: "b1", Records: recs}))
	stop := dlqStartWorker(t, c)
	st := dlqWaitSettled(t, c, "b1", 30*time.Second)
	stop()
	require.Equal(t, 3, st.DeadLettered)
	require.Equal(t, ledger.BatchSettled, st.State)
	require.Equal(t, 3, c.fake.Stats().Requests, "a rejected record costs one call")

	// The morning: what failed and why.
	items := dlqListJSON(t, c)
	require.Len(t, items, 3)
	reason := items[0]["reason"].(string)
	for _, it := range items {
		require.Equal(t, "b1", it["batch"])
		require.Equal(t, "rejected", it["class"])
		require.Equal(t, reason, it["reason"])
		require.EqualValues(t, 400, it["status"])
		require.NotNil(t, it["code"], "the vendor's own code is kept")
		require.EqualValues(t, 1, it["attempts"])
	}
	r := c.run("", "dlq", "list")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `rejected / `+regexp.QuoteMeta(reason)+`:\s+3`, r.stdout)

	id := strconv.FormatInt(int64(items[0]["id"].(float64)), 10)
	r = c.run("", "dlq", "show", id, "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var shown map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &shown))
	require.Equal(t, dlqSorted(dlqShowKeys), dlqKeySet(shown))
	request, _ := json.Marshal(shown["request"])
	require.Contains(t, string(request), "POISON", "the rendered request is kept")
	require.NotContains(t, r.stdout, "sk-cli-secret")
	require.Equal(t, items[0]["record_id"], shown["record"].(map[string]any)["id"], "the input record is shown")
	r = c.run("", "dlq", "show", id)
	require.Equal(t, exitOK, r.code, r.stderr)
	for _, want := range []string{"class:", "rejected", "reason:", reason, "status:", "400", "request:", "POISON", "error (redacted excerpt):", "record:"} {
		require.Contains(t, r.stdout, want)
	}
	require.NotContains(t, r.stdout, "sk-cli-secret")

	// Fix the prompt (and change max_attempts, to see the jobs take the
	// current configuration), then requeue the batch.
	dlqRewriteConfig(t, c, `prompt = "Record: {{json .}} POISON"`, goodPrompt+"\nmax_attempts = 3")
	r = c.run("", "dlq", "requeue", "--batch", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "requeued 3 records")
	require.NotContains(t, r.stderr, "warning", "the request changed")
	st = dlqBatchStatusOf(t, c, "b1")
	require.Equal(t, 0, st.DeadLettered, "requeued dead letters are not counted")
	require.Equal(t, 3, st.Pending)
	require.Equal(t, ledger.BatchRunning, st.State, "a settled batch is pending again")
	var queue string
	var maxAttempts, available int
	require.NoError(t, c.db.Pool.QueryRow(ctx, `SELECT min(queue), min(max_attempts), count(*) FROM river_job
		WHERE state = 'available' AND args->>'batch' = 'b1'`).Scan(&queue, &maxAttempts, &available))
	require.Equal(t, 3, available)
	require.Equal(t, "key_main", queue)
	require.Equal(t, 3+jobargs.AttemptHeadroom, maxAttempts, "max_attempts comes from the configuration as it is now")

	r = c.run("", "dlq", "requeue", "--batch", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "requeued 0 records", "running requeue twice requeues nothing twice")
	require.Equal(t, 3, dlqRiverJobs(t, c, "b1", "available"))

	dlqStartWorker(t, c)
	st = dlqWaitSettled(t, c, "b1", 30*time.Second)
	require.Equal(t, 3, st.Completed)
	require.Equal(t, 0, st.DeadLettered)
	require.Equal(t, ledger.BatchSettled, st.State)
	require.Equal(t, 6, c.fake.Stats().Requests, "each record: one rejected call, one good one")
	require.Empty(t, dlqListJSON(t, c))
	r = c.run("", "dlq", "list")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stdout, "no dead letters")
}

// dlqSeedDeadLetters creates batches and dead letters directly in the ledger.
type dlqSeededDL struct {
	batch, record, class, reason, code string
	status                             int
	request                            string
	suspect                            string
}

func dlqSeedBatch(t *testing.T, c *cli, batch string, n int) {
	t.Helper()
	recs, err := enqueue.ReadJSONL(strings.NewReader(jsonl(n)), "in.jsonl")
	require.NoError(t, err)
	require.NoError(t, ledger.CreateBatch(context.Background(), c.db.Pool,
		ledger.Batch{ID: batch, Pipeline: "enrich", Key: "main"}, recs))
}

func dlqSeedDeadLetters(t *testing.T, c *cli, dls ...dlqSeededDL) []int64 {
	t.Helper()
	ids := make([]int64, len(dls))
	for i, d := range dls {
		class, err := classify.ParseClass(d.class)
		require.NoError(t, err)
		id, err := ledger.AddDeadLetter(context.Background(), c.db.Pool, ledger.DeadLetterRow{
			Batch: d.batch, RecordID: d.record, Pipeline: "enrich", Key: "main", Class: class, Reason: d.reason,
			HTTPStatus: d.status, VendorCode: d.code, Attempts: 1, Request: json.RawMessage(d.request),
			ErrorExcerpt: `{"error":{"message":"bad","api_key":"sk-cli-secret-123456"}}`, Suspect: d.suspect,
		})
		require.NoError(t, err)
		ids[i] = id
	}
	return ids
}

func dlqSeedMorning(t *testing.T, c *cli) []int64 {
	t.Helper()
	dlqSeedBatch(t, c, "b1", 4)
	dlqSeedBatch(t, c, "b2", 1)
	return dlqSeedDeadLetters(t, c,
		dlqSeededDL{batch: "b1", record: "r001", class: "rejected", reason: "context_length", status: 400, code: "context_length_exceeded"},
		dlqSeededDL{batch: "b1", record: "r002", class: "rejected", reason: "context_length", status: 400, code: "context_length_exceeded"},
		dlqSeededDL{batch: "b1", record: "r003", class: "transient", reason: "retries_exhausted", status: 503},
		dlqSeededDL{batch: "b2", record: "r001", class: "ambiguous", reason: "ambiguous_retries_exhausted"},
	)
}

func TestDLQList(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	require.Empty(t, dlqListJSON(t, c))
	r := c.run("", "dlq", "list", "--json")
	require.JSONEq(t, `[]`, r.stdout)

	ids := dlqSeedMorning(t, c)
	items := dlqListJSON(t, c)
	require.Len(t, items, 4)
	got, err := json.Marshal(items[3])
	require.NoError(t, err)
	created := items[3]["created_at"].(string)
	require.JSONEq(t, `{"id":`+strconv.FormatInt(ids[3], 10)+`,"batch":"b2","record_id":"r001","class":"ambiguous",
		"reason":"ambiguous_retries_exhausted","status":null,"code":null,"attempts":1,"created_at":"`+created+`","suspect":null}`, string(got))
	require.EqualValues(t, 400, items[0]["status"])
	require.Equal(t, "context_length_exceeded", items[0]["code"])

	require.Len(t, dlqListJSON(t, c, "--batch", "b1", "--class", "rejected"), 2)
	require.Len(t, dlqListJSON(t, c, "--reason", "retries_exhausted"), 1)
	require.Len(t, dlqListJSON(t, c, "--batch", "b2"), 1)
	// A batch id the user typed that does not exist is bad input, as for
	// status, export and ledger.
	r = c.run("", "dlq", "list", "--batch", "nope", "--json")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `no batch "nope"`)

	r = c.run("", "dlq", "list")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "4 dead letters")
	require.Regexp(t, `rejected / context_length:\s+2\s+\(400 context_length_exceeded\)`, r.stdout)
	require.Regexp(t, `transient / retries_exhausted:\s+1\s+\(503\)`, r.stdout)
	require.Regexp(t, `ambiguous / ambiguous_retries_exhausted:\s+1`, r.stdout)
	require.Regexp(t, `(?m)^ID\s+BATCH\s+RECORD\s+CLASS\s+REASON\s+STATUS\s+CODE\s+ATTEMPTS\s+SUSPECT\s+CREATED$`, r.stdout)
	require.Regexp(t, `(?m)^`+strconv.FormatInt(ids[3], 10)+`\s+b2\s+r001\s+ambiguous\s+ambiguous_retries_exhausted\s+-\s+-\s+1\s+-\s+`, r.stdout)

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"bad class", []string{"--class", "broken"}},
		{"unknown flag", []string{"--frobnicate"}},
		{"positional", []string{"b1"}},
		{"flag without value", []string{"--batch"}},
	} {
		r := c.run("", append([]string{"dlq", "list"}, tc.args...)...)
		require.Equal(t, exitUsage, r.code, tc.name)
		require.Empty(t, r.stdout, tc.name)
	}
	r = c.run("", "dlq", "list", "--class", "broken")
	require.Contains(t, r.stderr, "transient")
	r = c.run("", "dlq")
	require.Equal(t, exitUsage, r.code)
	r = c.run("", "dlq", "frob")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `unknown subcommand "frob"`)
}

func TestDLQShow(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	ids := dlqSeedMorning(t, c)
	id := strconv.FormatInt(ids[0], 10)

	r := c.run("", "dlq", "show", id, "--json") // the flag after the ID
	require.Equal(t, exitOK, r.code, r.stderr)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &m))
	require.Equal(t, dlqSorted(dlqShowKeys), dlqKeySet(m))
	require.Equal(t, "context_length_exceeded", m["code"])
	require.Equal(t, "enrich", m["pipeline"])
	require.Nil(t, m["requeued_at"])
	require.Nil(t, m["request"])
	require.Equal(t, map[string]any{"id": "r001", "name": "name 1"}, m["record"])
	require.NotContains(t, r.stdout, "sk-cli-secret", "the excerpt is redacted")
	require.Contains(t, m["error_excerpt"], "[REDACTED]")

	r = c.run("", "dlq", "show", "--json", id)
	require.Equal(t, exitOK, r.code, r.stderr)

	r = c.run("", "dlq", "show", id)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "dead letter "+id)
	require.Regexp(t, `code:\s+context_length_exceeded`, r.stdout)
	require.Regexp(t, `requeued:\s+no`, r.stdout)
	require.Contains(t, r.stdout, `"name": "name 1"`)
	require.Contains(t, r.stdout, "triage dlq requeue "+id)

	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"unknown id", "no dead letter with id 99999", []string{"99999"}},
		{"not a number", "not a dead letter ID", []string{"abc"}},
		{"negative", "", []string{"--", "-3"}},
		{"zero", "not a dead letter ID", []string{"0"}},
		{"no id", "exactly one", nil},
		{"two ids", "exactly one", []string{id, id}},
		{"unknown flag", "", []string{id, "--verbose"}},
	} {
		r := c.run("", append([]string{"dlq", "show"}, tc.args...)...)
		require.Equal(t, exitUsage, r.code, tc.name)
		require.Empty(t, r.stdout, tc.name)
		require.Contains(t, r.stderr, tc.want, tc.name)
	}
}

func TestDLQRequeueByID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	ids := dlqSeedMorning(t, c)
	s := func(id int64) string { return strconv.FormatInt(id, 10) }
	require.Equal(t, 3, dlqBatchStatusOf(t, c, "b1").DeadLettered)

	r := c.run("", "dlq", "requeue", s(ids[0]), s(ids[2]))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "requeued 2 records (batch b1)")
	st := dlqBatchStatusOf(t, c, "b1")
	require.Equal(t, 1, st.DeadLettered)
	require.Equal(t, 3, st.Pending)

	var args []byte
	var queue string
	require.NoError(t, c.db.Pool.QueryRow(ctx, `SELECT args, queue FROM river_job WHERE kind = $1 AND args->>'record_id' = 'r003'`,
		jobargs.Kind).Scan(&args, &queue))
	require.JSONEq(t, `{"batch":"b1","pipeline":"enrich","record_id":"r003","record":{"id":"r003","name":"name 3"}}`, string(args))
	require.Equal(t, "key_main", queue)

	r = c.run("", "dlq", "requeue", s(ids[0]))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "requeued 0 records")
	require.Contains(t, r.stdout, "1 already requeued")
	require.Equal(t, 2, dlqRiverJobs(t, c, "b1", "available"))

	r = c.run("", "dlq", "show", s(ids[0]), "--json")
	require.Equal(t, exitOK, r.code)
	require.NotContains(t, r.stdout, `"requeued_at": null`)

	// An unknown ID among known ones: nothing is requeued.
	r = c.run("", "dlq", "requeue", s(ids[1]), "99999")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "no dead letter with id 99999")
	require.Equal(t, 1, dlqBatchStatusOf(t, c, "b1").DeadLettered)

	// b2 was settled (its one record dead-lettered); requeue makes it pending.
	st = dlqBatchStatusOf(t, c, "b2")
	require.Equal(t, ledger.BatchSettled, st.State)
	r = c.run("", "dlq", "requeue", "--batch", "b2", "--class", "ambiguous")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "requeued 1 record (batch b2)")
	st = dlqBatchStatusOf(t, c, "b2")
	require.Equal(t, ledger.BatchRunning, st.State)
	require.Equal(t, 1, st.Pending)
	require.Equal(t, 0, st.DeadLettered)
}

func TestDLQRequeueFilters(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	dlqSeedMorning(t, c)

	r := c.run("", "dlq", "requeue", "--batch", "b1", "--class", "rejected", "--reason", "retries_exhausted")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "requeued 0 records", "no rejected record has that reason")
	r = c.run("", "dlq", "requeue", "--batch", "b1", "--reason", "retries_exhausted")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "requeued 1 record ")
	items := dlqListJSON(t, c, "--batch", "b1")
	require.Len(t, items, 2)
	for _, it := range items {
		require.Equal(t, "rejected", it["class"])
	}

	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"nothing chosen", "give dead letter IDs, --batch B or --suspect", nil},
		{"ids and batch", "not both", []string{"1", "--batch", "b1"}},
		{"class without batch", "add --batch", []string{"--class", "rejected"}},
		{"bad class", "unknown class", []string{"--batch", "b1", "--class", "nope"}},
		{"unknown batch", `no batch "zz"`, []string{"--batch", "zz"}},
		{"unknown flag", "", []string{"--batch", "b1", "--force"}},
		{"not an id", "not a dead letter ID", []string{"x1"}},
	} {
		r := c.run("", append([]string{"dlq", "requeue"}, tc.args...)...)
		require.Equal(t, exitUsage, r.code, tc.name)
		require.Contains(t, r.stderr, tc.want, tc.name)
	}
	require.Len(t, dlqListJSON(t, c), 3, "no failed requeue changed anything")
}

func TestDLQRequeueRespectsCurrentConfig(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	dlqSeedBatch(t, c, "b1", 2)
	cfg, err := config.Load(c.config)
	require.NoError(t, err)
	pl, err := cfg.Pipeline("enrich")
	require.NoError(t, err)
	prompt, err := pl.Render(map[string]any{"id": "r001", "name": "name 1"})
	require.NoError(t, err)
	same, err := json.Marshal(map[string]any{"model": "fake-model", "system": pl.System, "prompt": prompt})
	require.NoError(t, err)
	ids := dlqSeedDeadLetters(t, c,
		dlqSeededDL{batch: "b1", record: "r001", class: "rejected", reason: "invalid_param", status: 400, request: string(same)},
		dlqSeededDL{batch: "b1", record: "r002", class: "rejected", reason: "invalid_param", status: 400,
			request: `{"model":"fake-model","prompt":"something else"}`},
	)

	// The pipeline is gone from the configuration: nothing is requeued.
	dlqRewriteConfig(t, c, `name = "enrich"`, `name = "enrich2"`)
	r := c.run("", "dlq", "requeue", "--batch", "b1")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "nothing requeued")
	require.Len(t, dlqListJSON(t, c), 2)
	dlqRewriteConfig(t, c, `name = "enrich2"`, `name = "enrich"`)

	// A rejected request that would be sent unchanged is requeued with a warning.
	r = c.run("", "dlq", "requeue", strconv.FormatInt(ids[0], 10), strconv.FormatInt(ids[1], 10))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "requeued 2 records")
	require.Contains(t, r.stderr, "warning: 1 rejected records render the same request")
}

// Two requeues of the same batch at once: each record is requeued by one of
// them, and gets one new job.
func TestDLQRequeueConcurrent(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	dlqSeedMorning(t, c)
	results := make(chan result, 2)
	for range 2 {
		go func() { results <- c.run("", "dlq", "requeue", "--batch", "b1") }()
	}
	total := 0
	for range 2 {
		r := <-results
		require.Equal(t, exitOK, r.code, r.stderr)
		m := regexp.MustCompile(`requeued (\d+) record`).FindStringSubmatch(r.stdout)
		require.NotNil(t, m, r.stdout)
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	require.Equal(t, 3, total)
	require.Equal(t, 3, dlqRiverJobs(t, c, "b1", "available"))
	require.Equal(t, 0, dlqBatchStatusOf(t, c, "b1").DeadLettered)
}

// Issue 9 fault 6: a dead letter whose job is still live (written, then the
// cancel lost) is not requeued: exit 1, a message saying why, nothing changed.
func TestDLQRequeueRefusesLiveJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	r := c.run("", "enqueue", "--pipeline", workertest.Pipeline, "--batch", "b1", c.file("in.jsonl", jsonl(1)))
	require.Equal(t, exitOK, r.code, r.stderr)
	var jobID int64
	require.NoError(t, c.db.Pool.QueryRow(ctx, `SELECT id FROM river_job WHERE args->>'batch' = 'b1'`).Scan(&jobID))
	id, err := ledger.AddDeadLetter(ctx, c.db.Pool, ledger.DeadLetterRow{Batch: "b1", RecordID: "r001", JobID: jobID,
		Pipeline: workertest.Pipeline, Key: workertest.Key, Class: classify.Rejected, Reason: "bad_request", Attempts: 1})
	require.NoError(t, err)

	r = c.run("", "dlq", "requeue", strconv.FormatInt(id, 10))
	require.Equal(t, exitRuntime, r.code, r.stderr)
	require.Contains(t, r.stderr, "still live")
	var jobs int
	require.NoError(t, c.db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args->>'batch' = 'b1'`).Scan(&jobs))
	require.Equal(t, 1, jobs, "no second job for the record")
}

// The suspect dead letters (a class from the signal layer, the status
// alone, a default, or the safety net) are listed, shown and requeued on
// their own: the operator takes back just those.
func TestDLQSuspect(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	dlqSeedBatch(t, c, "b1", 4)
	dlqSeedBatch(t, c, "b2", 2)
	ids := dlqSeedDeadLetters(t, c,
		dlqSeededDL{batch: "b1", record: "r001", class: "rejected", reason: "context_length", status: 400, code: "context_length_exceeded"},
		dlqSeededDL{batch: "b1", record: "r002", class: "rejected", reason: "signal_content_policy", status: 400, suspect: ledger.SuspectSignal},
		dlqSeededDL{batch: "b2", record: "r001", class: "rejected", reason: "unknown_4xx", status: 400, suspect: ledger.SuspectUnknown},
	)

	items := dlqListJSON(t, c, "--suspect")
	require.Len(t, items, 2)
	require.Equal(t, "signal", items[0]["suspect"])
	require.Equal(t, "unknown_error", items[1]["suspect"])
	require.Nil(t, dlqListJSON(t, c)[0]["suspect"])
	r := c.run("", "dlq", "list")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "SUSPECT")
	require.Contains(t, r.stdout, "2 suspect")
	r = c.run("", "dlq", "show", strconv.FormatInt(ids[1], 10))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "suspect:")
	require.Contains(t, r.stdout, "signal")

	r = c.run("", "dlq", "requeue", "--suspect", "--batch", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "requeued 1 record ")
	r = c.run("", "dlq", "requeue", "--suspect")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "requeued 1 record ")
	left := dlqListJSON(t, c)
	require.Len(t, left, 1, "only the sure dead letter is left")
	require.Equal(t, "context_length", left[0]["reason"])
	r = c.run("", "dlq", "requeue", "--suspect", "1")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "not both")
}
