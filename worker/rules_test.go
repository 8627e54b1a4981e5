package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/workertest"
)

// TestUserRuleOverridesBuiltInVerdict loads a triage.toml whose [[rules]]
// entry overrides a built-in verdict, and shows it deciding in the worker:
// the fake provider's "exhausted" answer (429 insufficient_quota), which the
// built-in table calls exhausted (pause the key, keep the job), is here the
// operator's rejected, so the record is dead-lettered after one call, with
// the rule that decided, and the key is never paused.
func TestUserRuleOverridesBuiltInVerdict(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{RecordScripts: map[string][]fakeprovider.Step{
		"r002": steps(act(fakeprovider.ActionExhausted)),
	}}, tweaks{})
	cfg, err := config.Parse([]byte(b.tomlText+`
[[rules]]
code = "insufficient_quota"
class = "rejected"
reason = "operator_says_bad_record"
`), "test.toml")
	require.NoError(t, err)
	b.cfg, b.opts = cfg, workertest.WorkerOptions(cfg, b.db.Schema)

	b.enqueue(t, "b1", records(3, nil))
	rt := b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, 1, st.DeadLettered)
	require.Equal(t, 1, b.fake.Stats().ByRecord["r002"].Requests, "decided once, never resent")

	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Equal(t, "r002", dls[0].RecordID)
	require.Equal(t, "rejected", dls[0].Class)
	require.Equal(t, "operator_says_bad_record", dls[0].Reason)
	require.Equal(t, "user/rules[0]", dls[0].Rule, "the dead letter names the rule that decided")
	require.False(t, dls[0].Unknown)

	p, err := rt.Store().ActivePause(context.Background(), "main")
	require.NoError(t, err)
	require.Nil(t, p, "the built-in verdict (exhausted) would have paused the key")
}
