package main

import (
	"fmt"
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
