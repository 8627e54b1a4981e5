package fakeprovider_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

func TestParseScenario(t *testing.T) {
	t.Parallel()
	sc, err := fakeprovider.ParseScenario(strings.NewReader(`{
		"name": "t", "seed": 5, "api_key": "k",
		"price": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 2},
		"balance": {"usd": 3},
		"rate_limit": {"requests_per_minute": 10, "tokens_per_minute": 1000},
		"outages": [{"from_request": 3, "requests": 2}, {"after": "1m", "for": 30, "action": "server_error"}],
		"poison": {"context_tokens": 100, "invalid_marker": "X", "policy_marker": "Y"},
		"random": [{"p": 0.5, "action": "cut_stream", "chunks": 3}],
		"script": [429, "hang", {"action": "overloaded", "status": 503, "retry_after": "2s"}],
		"record_scripts": {"r1": [500, 200]},
		"latency": "0s"
	}`))
	require.NoError(t, err)
	require.Equal(t, []fakeprovider.Step{
		{Status: 429},
		{Action: fakeprovider.ActionHang},
		{Action: fakeprovider.ActionOverloaded, Status: 503, RetryAfter: fakeprovider.Duration(2 * time.Second)},
	}, sc.Script)
	require.Equal(t, fakeprovider.Duration(30*time.Second), sc.Outages[1].For, "a bare number is seconds")
	require.Equal(t, fakeprovider.Duration(time.Minute), sc.Outages[1].After)
	require.Equal(t, 3.0, sc.Balance.USD)

	// A scenario survives a round trip, steps keeping their short forms.
	b, err := json.Marshal(sc)
	require.NoError(t, err)
	require.Contains(t, string(b), `"script":[429,"hang",{"action":"overloaded","status":503,"retry_after":"2s"}]`)
	again, err := fakeprovider.ParseScenario(strings.NewReader(string(b)))
	require.NoError(t, err)
	require.Equal(t, sc.Script, again.Script)
	require.Equal(t, sc.Outages, again.Outages)
}

func TestParseScenarioRejects(t *testing.T) {
	t.Parallel()
	for in, msg := range map[string]string{
		`{"scripts": [429]}`:                          "unknown field",
		`{"script": ["explode"]}`:                     `script[0]: unknown action "explode"`,
		`{"script": [418]}`:                           "script[0]: status 418 has no default action",
		`{"script": [{"action": "ok", "colour": 1}]}`: "unknown field",
		`{"random": [{"p": 0.7, "action": "hang"}, {"p": 0.7, "action": "ok"}]}`: "more than 1",
		`{"random": [{"p": 2, "action": "hang"}]}`:                               "random[0].p",
		`{"outages": [{"action": "overloaded"}]}`:                                "outages[0]: set requests",
		`{"outages": [{"from_request": 0, "requests": 1}]}`:                      "1-based",
		`{"record_scripts": {"a": [{"status": 999}]}}`:                           `record_scripts["a"][0]`,
		`{"latency": "soon"}`:                                                    "invalid duration",
	} {
		_, err := fakeprovider.ParseScenario(strings.NewReader(in))
		require.ErrorContains(t, err, msg, in)
	}
	require.Panics(t, func() { fakeprovider.New(fakeprovider.Scenario{Script: []fakeprovider.Step{{}}}) })
}

func TestShippedScenarios(t *testing.T) {
	t.Parallel()
	require.ElementsMatch(t, []string{"storm", "exhaustion", "throttle"}, fakeprovider.ScenarioNames())
	for _, name := range fakeprovider.ScenarioNames() {
		sc, err := fakeprovider.LoadScenario(name)
		require.NoError(t, err, name)
		require.Equal(t, name, sc.Name)
		require.NotPanics(t, func() { fakeprovider.New(sc).Close() })
	}
	_, err := fakeprovider.LoadScenario("nope")
	require.ErrorContains(t, err, "have exhaustion, storm, throttle")

	sc, err := fakeprovider.LoadScenarioFile("throttle")
	require.NoError(t, err, "a bare name falls back to the shipped scenarios")
	require.Equal(t, 60, sc.RateLimit.RequestsPerMinute)

	path := filepath.Join(t.TempDir(), "mine.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"name":"mine","script":[503]}`), 0o600))
	sc, err = fakeprovider.LoadScenarioFile(path)
	require.NoError(t, err)
	require.Equal(t, "mine", sc.Name)
	_, err = fakeprovider.LoadScenarioFile(filepath.Join(t.TempDir(), "missing.json"))
	require.Error(t, err)
}

func TestExhaustionScenarioRunsOut(t *testing.T) {
	t.Parallel()
	sc, err := fakeprovider.LoadScenario("exhaustion")
	require.NoError(t, err)
	b := setup(t, sc)
	ok := 0
	for i := range 100 {
		r, err := b.post(t, ctxT(t), "openai", rawBody("openai", string(rune('a'+i%26)), false), nil)
		require.NoError(t, err)
		if r.status != 200 {
			require.Equal(t, 429, r.status)
			require.Contains(t, r.body, "insufficient_quota")
			break
		}
		ok++
	}
	require.Greater(t, ok, 5)
	require.Less(t, ok, 100)
}

func TestExpectedAnswer(t *testing.T) {
	t.Parallel()
	a := fakeprovider.ExpectedAnswer(`Record: {"id": "x\"1", "n": 2}`, true)
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(a), &obj))
	require.Equal(t, `x"1`, obj["id"])
	require.Contains(t, fakeprovider.ExpectedAnswer(`{"id":42}`, false), "Record 42:")
	require.NotContains(t, fakeprovider.ExpectedAnswer("no id here", true), `"id"`)
	require.Equal(t, a, fakeprovider.ExpectedAnswer(`Record: {"id": "x\"1", "n": 2}`, true))
}

// A step with a body of its own is sent as is with its status, and a
// balance's answer replaces the exhausted error until a top-up.
func TestStepBodyAndBalanceAnswer(t *testing.T) {
	body := `{"error":{"message":"declined by gate ug-1","type":"requests","code":"gate_declined"}}`
	sc, err := fakeprovider.ParseScenario(strings.NewReader(`{"balance":{"usd":0,"answer":{"status":429,"body":` + body + `}}}`))
	require.NoError(t, err)
	require.Equal(t, 429, sc.Balance.Answer.Status)
	_, err = fakeprovider.ParseScenario(strings.NewReader(`{"script":[{"body":{"a":1}}]}`))
	require.ErrorContains(t, err, "a body needs an error status")
}
