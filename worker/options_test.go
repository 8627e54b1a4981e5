package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/workertest"
)

// A negative setting is a mistake to say, not a value to replace: New
// refuses it with an error naming the setting, where it used to run with
// the default as if the setting had been left out.
func TestNewRefusesNegativeOptions(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{}, tweaks{})
	for _, tc := range []struct {
		setting string
		set     func(o *worker.Options)
	}{
		{"BackoffBase", func(o *worker.Options) { o.BackoffBase = -time.Second }},
		{"BackoffCap", func(o *worker.Options) { o.BackoffCap = -time.Second }},
		{"ThrottleWait", func(o *worker.Options) { o.ThrottleWait = -time.Second }},
		{"JobMargin", func(o *worker.Options) { o.JobMargin = -time.Second }},
		{"BudgetRecheck", func(o *worker.Options) { o.BudgetRecheck = -time.Second }},
		{"RetryWindow", func(o *worker.Options) { o.RetryWindow = -time.Minute }},
		{"RetryFloor", func(o *worker.Options) { o.RetryFloor = -1 }},
		{"RetryDefer", func(o *worker.Options) { o.RetryDefer = -time.Second }},
		{"MaxAge", func(o *worker.Options) { o.MaxAge = -time.Hour }},
		{"SpendCheck", func(o *worker.Options) { o.SpendCheck = -time.Second }},
		{"HoldAnswer", func(o *worker.Options) { o.HoldAnswer = -time.Minute }},
		{"BatchWait", func(o *worker.Options) { o.BatchWait = -time.Minute }},
		{"RescueAfter", func(o *worker.Options) { o.RescueAfter = -time.Minute }},
		{"ProbeLease", func(o *worker.Options) { o.ProbeLease = -time.Minute }},
		{"SupervisorTick", func(o *worker.Options) { o.SupervisorTick = -time.Second }},
		{"FetchCooldown", func(o *worker.Options) { o.FetchCooldown = -time.Second }},
		{"FetchPollInterval", func(o *worker.Options) { o.FetchPollInterval = -time.Second }},
		{"PacerHeartbeat", func(o *worker.Options) { o.PacerHeartbeat = -time.Second }},
		{"KeyPauseAfter", func(o *worker.Options) { o.KeyPauseAfter = -time.Second }},
		{"Batch", func(o *worker.Options) { o.Batch.Gather = -time.Second }},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			t.Parallel()
			opts := b.opts
			opts.Pool = b.db.Pool
			tc.set(&opts)
			_, err := worker.New(opts)
			require.Error(t, err, "a negative %s is refused", tc.setting)
			require.Regexp(t, `Options\.`+tc.setting+`[ :]`, err.Error())
			require.True(t, strings.Contains(err.Error(), "negative"), err.Error())
		})
	}
}

// WithDefaults fills every unset setting with its documented default, and
// keeps the ones set.
func TestOptionsWithDefaults(t *testing.T) {
	t.Parallel()
	o := worker.Options{}.WithDefaults()
	require.Equal(t, worker.BackoffBaseDefault, o.BackoffBase)
	require.Equal(t, worker.BackoffCapDefault, o.BackoffCap)
	require.Equal(t, worker.ThrottleWaitDefault, o.ThrottleWait)
	require.Equal(t, worker.JobMarginDefault, o.JobMargin)
	require.Equal(t, worker.BudgetRecheckDefault, o.BudgetRecheck)
	require.Equal(t, worker.RetryDeferDefault, o.RetryDefer)
	require.Equal(t, worker.MaxAgeDefault, o.MaxAge)
	require.Equal(t, worker.SpendCheckDefault, o.SpendCheck)
	require.Equal(t, worker.HoldAnswerDefault, o.HoldAnswer)
	require.Equal(t, worker.BatchWaitDefault, o.BatchWait)
	require.Equal(t, o.RetryBudget(), worker.Options{}.RetryBudget())
	require.NotNil(t, o.Logger)
	require.NotNil(t, o.Getenv)
	set := worker.Options{BackoffBase: 3 * time.Second, BatchWait: time.Minute, RetryWindow: 20 * time.Second, RetryFloor: 2}.WithDefaults()
	require.Equal(t, 3*time.Second, set.BackoffBase)
	require.Equal(t, time.Minute, set.BatchWait)
	require.Equal(t, 20*time.Second, set.RetryBudget().Window)
	require.Equal(t, 2, set.RetryBudget().Floor)
}

// The two defaults that depend on the keys are resolved in WithDefaults,
// the one place, and the horizon the web window shows (ConfigHorizon) is
// the one a worker with those options gives River: ProbeLease from the
// keys this process works, RescueAfter from every key in the
// configuration; a value set is kept.
func TestKeyDependentDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(workertest.Config(workertest.ConfigOptions{BaseURL: "http://127.0.0.1:1/v1", Timeout: "2s", ExtraPipeline: `
[[keys]]
name = "slow"
vendor = "openai"
base_url = "http://127.0.0.1:1/v1"
api_key_env = "` + workertest.APIKeyEnv + `"
timeout = "10m"
`})), "test.toml")
	require.NoError(t, err)
	margin := worker.JobMarginDefault
	fast := worker.Options{Config: cfg, Keys: []string{workertest.Key}}.WithDefaults()
	require.Equal(t, keys.ProbeLeaseDefault, fast.ProbeLease, "2·(2s + margin) is under keys' default")
	require.Equal(t, 2*(10*time.Minute+margin)+time.Minute, fast.RescueAfter, "every key's calls, not only this process's")
	all := worker.Options{Config: cfg}.WithDefaults()
	require.Equal(t, 2*(10*time.Minute+margin), all.ProbeLease, "raised to the slow key's longest call")
	require.Equal(t, fast.RescueAfter, worker.ConfigHorizon(cfg).RescueAfter)
	require.Equal(t, 10*time.Minute+margin, worker.ConfigHorizon(cfg).JobTimeout)
	set := worker.Options{Config: cfg, ProbeLease: time.Minute, RescueAfter: time.Hour}.WithDefaults()
	require.Equal(t, time.Minute, set.ProbeLease)
	require.Equal(t, time.Hour, set.RescueAfter)
	require.Zero(t, worker.Options{}.WithDefaults().ProbeLease, "no configuration, no keys to size it by")
}
