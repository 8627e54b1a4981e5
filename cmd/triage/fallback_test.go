package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/workertest"
)

// `triage run` works the fallback model's key too: with the primary's
// balance gone mid-batch, the run settles on the fallback, and status and
// export say which model answered.
func TestRunFallsBackWhenKeyExhausted(t *testing.T) {
	t.Parallel()
	fb, fbURL := workertest.Provider(t, fakeprovider.Scenario{APIKey: cliAPIKey, NoReplay: true})
	c := newCLI(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0.00005}, NoReplay: true},
		fmt.Sprintf(`fallback = ["fb-model"]
fallback_grace = "100ms"

[[keys]]
name = "fb"
vendor = "openai"
base_url = %q
api_key_env = %q

[[models]]
name = "fb-model"
key = "fb"
json_mode = true
`, fbURL, workertest.APIKeyEnv))
	r := c.run(jsonl(20), "run", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Positive(t, fb.Stats().Requests)

	r = c.run("", "status", "b1", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.EqualValues(t, 20, gjson.Get(r.stdout, "completed").Int())
	fbAnswered := gjson.Get(r.stdout, "models.fb-model").Int()
	require.Positive(t, fbAnswered)
	require.Equal(t, fbAnswered, gjson.Get(r.stdout, "fallback").Int())

	r = c.run("", "export", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.EqualValues(t, fbAnswered, strings.Count(r.stdout, `"triage":{"model":"fb-model"}`))
}

// crossVendorFallback is a fallback key on another vendor (Anthropic) at
// baseURL, with its model; jsonMode says whether the model is declared to
// keep the JSON contract.
func crossVendorFallback(baseURL string, jsonMode bool) string {
	return fmt.Sprintf(`fallback = ["other-model"]
fallback_grace = "1s"

[[keys]]
name = "other"
vendor = "anthropic"
base_url = %q
api_key_env = %q

[[models]]
name = "other-model"
key = "other"
json_mode = %t
`, baseURL, workertest.APIKeyEnv, jsonMode)
}

// withProbeInterval rewrites the CLI's configuration with the primary
// key's probe_interval.
func (c *cli) withProbeInterval(d string) {
	c.t.Helper()
	raw, err := os.ReadFile(c.config)
	require.NoError(c.t, err)
	toml := strings.Replace(string(raw), `probe_interval = "`+workertest.ProbeIntervalDefault+`"`, `probe_interval = "`+d+`"`, 1)
	require.NoError(c.t, os.WriteFile(c.config, []byte(toml), 0o600))
}

// Issue 19 (6): a JSON pipeline's fallback on another vendor whose model
// does not say json_mode = true can serve none of its records, so with
// the primary exhausted and never topped up the run only waited, probing
// the dead key, until --max-wait (exit 4, the fallback never called).
// The configuration is refused instead, naming the setting, before any
// record is enqueued or sent.
func TestRunRefusesAFallbackThatCanServeNoRecord(t *testing.T) {
	t.Parallel()
	fb, fbURL := workertest.Provider(t, fakeprovider.Scenario{APIKey: cliAPIKey, NoReplay: true})
	c := newCLI(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0.00012}, NoReplay: true}, crossVendorFallback(fbURL, false))
	c.withProbeInterval("3s")
	r := c.run(jsonl(60), "run", "--pipeline", "enrich", "--batch", "b1", "--max-wait", "8s", "-")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, `pipelines[0] "enrich": fallback "other-model" can serve no record of an output = "json" pipeline: set json_mode = true on [[models]] "other-model"`)
	require.Zero(t, c.fake.Stats().Requests, "nothing sent to the primary")
	require.Zero(t, fb.Stats().Requests, "nothing sent to the fallback")
}

// Issue 19 (6), the setup that works: the same two vendors with the
// fallback's JSON mode declared. The primary's balance runs out after
// about ten records and is never topped up; the rest are answered by the
// fallback, and the exhausted key gets only its probes.
func TestRunFallsBackToAnotherVendorWhenKeyExhausted(t *testing.T) {
	t.Parallel()
	fb, fbURL := workertest.Provider(t, fakeprovider.Scenario{APIKey: cliAPIKey, NoReplay: true})
	c := newCLI(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0.00012}, NoReplay: true}, crossVendorFallback(fbURL, true))
	c.withProbeInterval("3s")
	r := c.run(jsonl(60), "run", "--pipeline", "enrich", "--batch", "b1", "--max-wait", "90s", "-")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = c.run("", "status", "b1", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.EqualValues(t, 60, gjson.Get(r.stdout, "completed").Int())
	fbAnswered := gjson.Get(r.stdout, "models.other-model").Int()
	require.EqualValues(t, fb.Stats().BilledCalls, fbAnswered, "each fallback answer billed once")
	require.EqualValues(t, 60, int(fbAnswered)+c.fake.Stats().BilledCalls)
	require.Zero(t, fb.Stats().DoubleBilledRecords+c.fake.Stats().DoubleBilledRecords)
}
