package main

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

var dryRunExpected = regexp.MustCompile(`expected\s+sync \$([0-9.]+)\s+batch \$([0-9.]+)`)

// dryRunNothingWritten: the database holds no batch beyond want and the
// provider saw no request beyond calls.
func dryRunNothingWritten(t *testing.T, c *cli, batches, calls int) {
	t.Helper()
	list, err := ledger.ListBatches(context.Background(), c.db.Pool)
	require.NoError(t, err)
	require.Len(t, list, batches, "a dry run queues nothing")
	require.Equal(t, calls, c.fake.Stats().Requests, "a dry run sends nothing")
}

// `--dry-run` on the README walkthrough's input (the demo's 300 records,
// the walkthrough's pipeline and prices) writes and sends nothing; once the
// pipeline has answered before, its expected cost agrees with what the
// ledger billed for a real run of the same input within 20 %. The fake
// provider replays no Idempotency-Key, as no real provider does.
func TestDryRunEstimateAgreesWithTheLedger(t *testing.T) {
	t.Parallel()
	storm, err := fakeprovider.LoadScenario("storm")
	require.NoError(t, err)
	c := newCLI(t, fakeprovider.Scenario{NoReplay: true, Poison: storm.Poison}, "")
	// The storm scenario's context window, stated on the model as a user
	// would from the vendor's model page.
	dlqRewriteConfig(t, c, "output_usd_per_mtok = 0.60\n", "output_usd_per_mtok = 0.60\ncontext_tokens = 16000\n")
	in := "../../cmd/triage/demo/sample.jsonl"

	// The first time: input known, output not.
	r := c.run("", "enqueue", "--dry-run", "--pipeline", "enrich", "--batch", "nightly", in)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "dry run: nothing queued, nothing sent")
	require.Contains(t, r.stdout, "records: 300 (2 over the model's context_tokens 16000")
	// No history: an estimate all the same, its basis said.
	require.Regexp(t, `output tokens: \d+ estimated \(\d+\.\d a record: as long as its input, capped at max_tokens; this pipeline has no answered call in the ledger yet\); at most \d+ \(max_tokens 1024 a record\)`, r.stdout)
	require.Contains(t, r.stdout, "time: unknown")
	require.Regexp(t, dryRunExpected, r.stdout, "an expected cost without history")
	require.Contains(t, r.stdout, "(output estimated from the input size)")
	atMost := regexp.MustCompile(`at most\s+sync \$([0-9.]+)`).FindStringSubmatch(r.stdout)
	require.NotNil(t, atMost, r.stdout)
	dryRunNothingWritten(t, c, 0, 0)

	r = c.run("", "run", "--pipeline", "enrich", "--batch", "nightly", in)
	require.Equal(t, exitDeadLetters, r.code, r.stderr)
	st, err := ledger.BatchStatus(context.Background(), c.db.Pool, "nightly")
	require.NoError(t, err)
	require.Positive(t, st.SpendUSD)
	max, err := strconv.ParseFloat(atMost[1], 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, max, st.SpendUSD, "at most is a bound")
	calls := c.fake.Stats().Requests

	// The next time, from the pipeline's answers: within 20 % of the bill.
	r = c.run("", "run", "--dry-run", "--pipeline", "enrich", in)
	require.Equal(t, exitOK, r.code, r.stderr)
	m := dryRunExpected.FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	expected, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	require.InEpsilon(t, st.SpendUSD, expected, 0.20, "dry run $%f, ledger $%f\n%s", expected, st.SpendUSD, r.stdout)
	batch, err := strconv.ParseFloat(m[2], 64)
	require.NoError(t, err)
	require.InEpsilon(t, expected/2, batch, 0.01, "batch prices default to half")
	require.Contains(t, r.stdout, "time: unknown", "the run's pacer left with the run")
	dryRunNothingWritten(t, c, 1, calls)

	// A key whose limit is known from the account page times the batch.
	dlqRewriteConfig(t, c, "concurrency = ", "rpm = 600\nconcurrency = ")
	r = c.run("", "enqueue", "--dry-run", "--pipeline", "enrich", in)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "time: about 30s at the key's configured rpm 600", "298 calls at 10/s")

	// Bad input is refused as enqueue refuses it, and writes nothing.
	r = c.run("{\"id\":1}\nnot json\n", "enqueue", "--dry-run", "--pipeline", "enrich", "-")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "stdin:2")
	require.Empty(t, r.stdout)
	dryRunNothingWritten(t, c, 1, calls)
}
