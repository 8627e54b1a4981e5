package worker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/workertest"
)

// River's rescuer runs on the leader with the leader's horizon. A process
// that works only the fast key must still wait out the slow key's calls
// before it rescues their jobs, or a live slow call is sent twice.
func TestRescueHorizonCoversKeysThisProcessDoesNotWork(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{}, tweaks{timeout: "2s", extraPipeline: `
[[keys]]
name = "slow"
vendor = "openai"
base_url = "http://127.0.0.1:1/v1"
api_key_env = "` + workertest.APIKeyEnv + `"
timeout = "10m"
`})
	cfg, err := config.Parse([]byte(b.tomlText), "test.toml")
	require.NoError(t, err)
	b.opts.Config = cfg
	b.opts.Keys = []string{workertest.Key}
	rt := b.newRuntime(t)
	h := rt.Horizon()
	require.GreaterOrEqual(t, h.JobTimeout, 10*time.Minute, "job timeout from the slow key")
	require.Greater(t, h.RescueAfter, 10*time.Minute, "rescue waits out the slow key's longest run")
}

// A streamed call may run to its pipeline's stream_max, past the key's
// timeout: the job's run and River's rescue wait it out, so a live stream
// is never rescued and sent a second time.
func TestRescueHorizonCoversAStreamsCeiling(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{}, tweaks{timeout: "2s", extraPipeline: "stream = true\nstream_idle_timeout = \"1s\"\nstream_max = \"7m\"\n"})
	h := b.newRuntime(t).Horizon()
	require.GreaterOrEqual(t, h.JobTimeout, 7*time.Minute, "job timeout from the stream's ceiling")
	require.Greater(t, h.RescueAfter, 7*time.Minute)
}
