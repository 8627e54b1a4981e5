package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/operator"
	"github.com/triage-dev/triage/worker/provider"
)

// keysViewKeys is the `triage keys --json` element's key set (a contract).
var keysViewKeys = []string{
	"concurrency_per_process", "configured", "key", "next_probe", "opened_at", "pacing", "pause_reason", "paused",
	"paused_until", "prepaid_usd", "prepaid_used_pct", "queue", "reason", "retry_budget", "safety_net", "spend_usd", "state", "storm", "vendor",
}

// keysHook records the webhook POSTs it receives.
type keysHook struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func (h *keysHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	h.mu.Lock()
	h.bodies = append(h.bodies, m)
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (h *keysHook) all() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.bodies...)
}

func keysJSON(t *testing.T, c *cli) map[string]map[string]any {
	t.Helper()
	r := c.run("", "keys", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list), r.stdout)
	out := map[string]map[string]any{}
	for _, v := range list {
		require.Equal(t, keysViewKeys, dlqKeySet(v))
		out[v["key"].(string)] = v
	}
	return out
}

func TestKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hook := &keysHook{}
	hookSrv := httptest.NewServer(hook)
	t.Cleanup(hookSrv.Close)
	c := newCLI(t, fakeprovider.Scenario{}, fmt.Sprintf("\n[alerts]\nwebhook_url = %q\n", hookSrv.URL))
	dlqRewriteConfig(t, c, `probe_interval = "500ms"`, `probe_interval = "500ms"`+"\nprepaid_usd = 10")

	views := keysJSON(t, c)
	require.Len(t, views, 1)
	got, err := json.Marshal(views["main"])
	require.NoError(t, err)
	require.JSONEq(t, `{"key":"main","configured":true,"vendor":"openai","queue":"key_main","state":"closed",
		"reason":null,"opened_at":null,"next_probe":null,"paused":false,"pause_reason":null,"paused_until":null,
		"concurrency_per_process":4,"spend_usd":0,"prepaid_usd":10,"prepaid_used_pct":0,
		"retry_budget":{"share":0.2,"window_s":60,"floor":10,"first_calls":0,"open_retries":0,"allowed":10,"spent":false},
		"storm":{"state":"closed","reason":null,"opened_at":null,"next_probe":null,"cooldown_s":null,
			"settings":{"failures":5,"share":0.5,"min_calls":10,"window_s":10,"probe_min_s":2,"probe_max_s":60,"alert_after_s":300}},
		"safety_net":{"hold":null,"fingerprint":null,"settings":{"suspect_rejections":8,"throttle_hold_after_s":2}},
		"pacing":null}`, string(got))

	// Spend $2.50 on the key, trip its breaker and pause it; give an
	// unconfigured key a pause too.
	dlqSeedBatch(t, c, "b1", 1)
	aid, err := ledger.BeginAttempt(ctx, c.db.Pool, ledger.Intent{Batch: "b1", RecordID: "r001", Attempt: 1, Key: "main",
		Model: "fake-model", IdempotencyKey: "k1", RequestHash: "h1"})
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(ctx, c.db.Pool, aid, ledger.Outcome{Status: ledger.AttemptOK, CostUSD: 2.5}))
	store := keys.DefaultStore(c.db.Pool)
	adm, err := store.Admit(ctx, "main", 0)
	require.NoError(t, err)
	opened, err := store.Trip(ctx, "main", adm, "insufficient_quota", time.Hour)
	require.NoError(t, err)
	require.True(t, opened)
	_, err = store.Pause(ctx, "main", keys.PauseExhausted, time.Now().Add(time.Hour))
	require.NoError(t, err)
	_, err = store.Pause(ctx, "ghost", keys.PauseThrottled, time.Now().Add(time.Hour))
	require.NoError(t, err)
	// A storm on a third key, not configured.
	rep, err := store.StormFailure(ctx, "stormy", keys.Admission{}, true, "transient_failures", 2*time.Second)
	require.NoError(t, err)
	require.True(t, rep.Opened)

	views = keysJSON(t, c)
	require.Len(t, views, 3)
	stormy := views["stormy"]["storm"].(map[string]any)
	require.Equal(t, "open", stormy["state"])
	require.Equal(t, "transient_failures", stormy["reason"])
	require.InDelta(t, 2.0, stormy["cooldown_s"], 1e-9)
	require.NotNil(t, stormy["next_probe"])
	require.Nil(t, stormy["settings"], "an unconfigured key's thresholds are unknown")
	require.Equal(t, "closed", views["stormy"]["state"], "the exhausted breaker is another one")
	main := views["main"]
	require.Equal(t, "open", main["state"])
	require.Equal(t, "insufficient_quota", main["reason"])
	require.NotNil(t, main["opened_at"])
	require.NotNil(t, main["next_probe"])
	require.Equal(t, true, main["paused"])
	require.Equal(t, "exhausted", main["pause_reason"])
	require.NotNil(t, main["paused_until"])
	require.InDelta(t, 2.5, main["spend_usd"], 1e-9)
	require.InDelta(t, 25.0, main["prepaid_used_pct"], 1e-9)
	ghost := views["ghost"]
	require.Equal(t, false, ghost["configured"])
	require.Nil(t, ghost["vendor"])
	require.Nil(t, ghost["concurrency_per_process"])
	require.Nil(t, ghost["prepaid_usd"])
	require.Equal(t, "closed", ghost["state"])
	require.Equal(t, "throttled", ghost["pause_reason"])
	require.Nil(t, ghost["retry_budget"], "an unconfigured key's retry_budget is unknown")

	r := c.run("", "keys")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^KEY\s+VENDOR\s+BREAKER\s+STORM\s+REASON\s+OPENED\s+NEXT PROBE\s+PAUSE\s+CONCURRENCY\s+SPEND\s+PREPAID\s+RETRIES\s+SAFETY NET$`, r.stdout)
	require.Regexp(t, `(?m)^main\s+openai\s+open\s+closed\s+insufficient_quota\s+.*exhausted until .*4 max per process\s+\$2\.5000\s+\$10\.00 \(25\.0 % used\)\s+0/10 open in 1m0s\s+8 rejections, throttled 2s$`, r.stdout)
	require.Regexp(t, `(?m)^ghost\s+\(not in config\)\s+closed\s+closed\s+.*\s-\s+-$`, r.stdout)
	require.Regexp(t, `(?m)^stormy\s+\(not in config\)\s+closed\s+open\s`, r.stdout)
	require.Contains(t, r.stdout, "key stormy: provider storm (storm breaker open)")
	require.Regexp(t, `(?m)^key main: exhausted \(insufficient_quota\) since .+; next probe at .+; its jobs stay queued$`, r.stdout)
	require.Regexp(t, `(?m)^key ghost: paused \(throttled\) until .+; its jobs wait$`, r.stdout)
	require.Contains(t, r.stdout, "triage keys resume KEY")

	// Resume by hand: breaker closed, pause ended, an alert raised.
	r = c.run("", "keys", "resume", "main")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "key main resumed")
	require.Contains(t, r.stderr, "resumed by hand", "the alert is logged")
	st, err := store.KeyStatus(ctx, "main")
	require.NoError(t, err)
	require.Equal(t, keys.StateClosed, st.State)
	require.Nil(t, st.Pause)
	var kind, msg string
	require.NoError(t, c.db.Pool.QueryRow(ctx, `SELECT kind, message FROM triage_alert WHERE key = 'main'`).Scan(&kind, &msg))
	require.Equal(t, string(keys.AlertKeyResumed), kind)
	require.Equal(t, "resumed by hand", msg)
	hooks := hook.all()
	require.Len(t, hooks, 1, "the webhook is POSTed before the command returns")
	require.Equal(t, "key_resumed", hooks[0]["kind"])
	require.Equal(t, "main", hooks[0]["key"])
	require.Equal(t, "resumed by hand", hooks[0]["message"])

	views = keysJSON(t, c)
	require.Equal(t, "closed", views["main"]["state"])
	require.Equal(t, false, views["main"]["paused"])
	require.Nil(t, views["main"]["next_probe"])

	// A key known only by its state in the database can be resumed too.
	r = c.run("", "keys", "resume", "ghost")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, false, keysJSON(t, c)["ghost"]["paused"])
}

func TestKeysUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"unknown flag", "", []string{"keys", "--all"}},
		{"stray argument", "did you mean", []string{"keys", "main"}},
		{"resume unknown key", `unknown key "nope"`, []string{"keys", "resume", "nope"}},
		{"resume no key", "exactly one KEY", []string{"keys", "resume"}},
		{"resume two keys", "exactly one KEY", []string{"keys", "resume", "main", "other"}},
		{"resume unknown flag", "", []string{"keys", "resume", "main", "--force"}},
	} {
		r := c.run("", tc.args...)
		require.Equal(t, exitUsage, r.code, tc.name)
		require.Empty(t, r.stdout, tc.name)
		require.Contains(t, r.stderr, tc.want, tc.name)
	}
	var n int
	require.NoError(t, c.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM triage_key_state`).Scan(&n))
	require.Zero(t, n, "a refused resume leaves no state behind")

	// A configured key without any state resumes fine (nothing to do).
	r := c.run("", "keys", "resume", "main")
	require.Equal(t, exitOK, r.code, r.stderr)
}

func TestKeysRetryBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	dlqRewriteConfig(t, c, `probe_interval = "500ms"`, `probe_interval = "500ms"`+"\nretry_budget = 0.5")
	// 30 first calls (allowed: max(10, 0.5 × 30) = 15) and 16 retries, of
	// which one succeeded: 15 open, the budget is spent.
	dlqSeedBatch(t, c, "b1", 30)
	attempt := func(record string, n int, status ledger.AttemptStatus) {
		t.Helper()
		id, err := ledger.BeginAttempt(ctx, c.db.Pool, ledger.Intent{Batch: "b1", RecordID: record, Attempt: n, Key: "main",
			Model: "fake-model", IdempotencyKey: record, RequestHash: "h", IsRetry: n > 1})
		require.NoError(t, err)
		if status != ledger.AttemptIntent {
			require.NoError(t, ledger.FinishAttempt(ctx, c.db.Pool, id, ledger.Outcome{Status: status, Class: classify.Transient}))
		}
	}
	for i := 1; i <= 30; i++ {
		attempt(fmt.Sprintf("r%03d", i), 1, ledger.AttemptFailed)
	}
	for i := 1; i <= 16; i++ {
		status := ledger.AttemptFailed
		switch i {
		case 1:
			status = ledger.AttemptOK
		case 2:
			status = ledger.AttemptIntent
		}
		attempt(fmt.Sprintf("r%03d", i), 2, status)
	}

	rb := keysJSON(t, c)["main"]["retry_budget"]
	got, err := json.Marshal(rb)
	require.NoError(t, err)
	require.JSONEq(t, `{"share":0.5,"window_s":60,"floor":10,"first_calls":30,"open_retries":15,"allowed":15,"spent":true}`, string(got))

	r := c.run("", "keys")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^main\s.*15/15 open in 1m0s, spent\s+8 rejections, throttled 2s$`, r.stdout)
	require.Contains(t, r.stdout, "key main: retry budget spent: 15 open retries, 15 allowed (max of 10 and 0.5 × 30 first calls in 1m0s)")
	require.NotContains(t, r.stdout, "exhausted")

	// retry_budget = 0: no retries at all.
	dlqRewriteConfig(t, c, "retry_budget = 0.5", "retry_budget = 0")
	rb = keysJSON(t, c)["main"]["retry_budget"]
	got, err = json.Marshal(rb)
	require.NoError(t, err)
	require.JSONEq(t, `{"share":0,"window_s":60,"floor":10,"first_calls":30,"open_retries":15,"allowed":0,"spent":true}`, string(got))
	r = c.run("", "keys")
	require.Regexp(t, `(?m)^main\s.*off \(retry_budget 0\)\s+8 rejections, throttled 2s$`, r.stdout)
	require.NotContains(t, r.stdout, "retry budget spent")
}

// Resuming a key that is not held is a no-op: no alert, no webhook.
func TestKeysResumeNotHeld(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	r := c.run("", "keys", "resume", "main")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "nothing to resume")
	require.Equal(t, 0, c.count("triage_alert"))
}

// `triage keys` shows how each key is paced, from the live processes'
// heartbeat rows: the fleet's rate, the share per process and the last
// rate-limit headers.
func TestKeysShowsPacing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	store := keys.DefaultStore(c.db.Pool)
	rl := provider.ParseRateLimit("openai", map[string]string{
		"x-ratelimit-limit-requests": "1800", "x-ratelimit-remaining-requests": "17", "x-ratelimit-reset-requests": "400ms",
		"x-ratelimit-limit-tokens": "120000", "x-ratelimit-remaining-tokens": "119000",
	}, time.Now())
	st := keys.PaceState{Source: keys.PaceHeaders, FleetRate: 29.1, FleetTokens: 1940, Factor: 1, ReqLimit: 30, TokLimit: 2000,
		Headers: rl, HeadersAt: time.Now(), Throttles: 1}
	for _, owner := range []string{"proc-a", "proc-b"} {
		_, err := store.PacerHeartbeat(ctx, "main", owner, st, time.Minute)
		require.NoError(t, err)
	}

	views := keysJSON(t, c)
	got, err := json.Marshal(views["main"]["pacing"])
	require.NoError(t, err)
	require.JSONEq(t, `{"live_processes":2,"source":"headers","rate_per_s":29.1,"share_per_process_per_s":14.55,
		"tokens_per_s":1940,"throttles":2,"limit_requests":1800,"remaining_requests":17,
		"limit_tokens":120000,"remaining_tokens":119000,"headers_at":`+string(mustJSON(t, views["main"]["pacing"].(map[string]any)["headers_at"]))+`}`, string(got))

	r := c.run("", "keys")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^key main: pacing at 29\.10/s \(from the rate-limit headers\), 2 processes at 14\.55/s each; 1940 input tokens/s; headers: limit 1800 requests, 17 remaining; limit 120000 tokens, 119000 remaining; 2 throttles lowered it$`, r.stdout)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// A key held by the safety net: the SAFETY NET column says so, a note names
// the fingerprint, and --json has the hold; a key's thresholds are shown
// otherwise.
func TestKeysShowsSafetyNetHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	dlqRewriteConfig(t, c, `probe_interval = "500ms"`, `probe_interval = "500ms"`+"\nsuspect_rejections = 5\nthrottle_hold_after = \"0s\"")
	r := c.run("", "keys")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "5 rejections")

	store := keys.DefaultStore(c.db.Pool)
	adm, err := store.Admit(ctx, "main", 0)
	require.NoError(t, err)
	fp := "400 invalid_request_error handle_state_invalid: the request was declined"
	opened, err := store.Trip(ctx, "main", adm, keys.HoldReason(keys.WatchDecision{Hold: keys.HoldRejectionStreak, Fingerprint: fp}), time.Hour)
	require.NoError(t, err)
	require.True(t, opened)

	r = c.run("", "keys")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "held: rejection_streak")
	require.Contains(t, r.stdout, `key main: held by the safety net (rejection_streak) for the error "`+fp+`"`)
	sn := keysJSON(t, c)["main"]["safety_net"].(map[string]any)
	require.Equal(t, "rejection_streak", sn["hold"])
	require.Equal(t, fp, sn["fingerprint"])
	require.Equal(t, map[string]any{"suspect_rejections": 5.0, "throttle_hold_after_s": 0.0}, sn["settings"])
}

// TestKeysPacingWords: each pace source reads as a phrase, never as the
// bare JSON value ("from configured").
func TestKeysPacingWords(t *testing.T) {
	t.Parallel()
	rate, share, tok := 8.0, 8.0, 1000.0
	for _, tc := range []struct {
		view operator.PacingView
		want string
	}{
		{operator.PacingView{LiveProcesses: 1, Source: "configured", RatePerS: &rate, SharePerProcessPerS: &share},
			"key main: pacing at 8.00/s (from the configured rpm/tpm), 1 process at 8.00/s each"},
		{operator.PacingView{LiveProcesses: 1, Source: "configured", TokensPerS: &tok},
			"key main: pacing by tokens (from the configured rpm/tpm), 1 process; 1000 input tokens/s"},
		{operator.PacingView{LiveProcesses: 2, Source: "headers", RatePerS: &rate, SharePerProcessPerS: &share},
			"key main: pacing at 8.00/s (from the rate-limit headers), 2 processes at 8.00/s each"},
		{operator.PacingView{LiveProcesses: 1, Source: "throttles", RatePerS: &rate, SharePerProcessPerS: &share},
			"key main: pacing at 8.00/s (learned from throttles), 1 process at 8.00/s each"},
		{operator.PacingView{LiveProcesses: 1, Source: "starting"},
			"key main: not paced (starting: no limit learned yet), 1 process"},
	} {
		require.Equal(t, tc.want, keysPacing("main", &tc.view))
	}
}
