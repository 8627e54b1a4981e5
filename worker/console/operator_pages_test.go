package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/workertest"
)

// The dead-letter page shows the record's calls (time, class, reason,
// status, cost) as `triage dlq show` does, wraps a long prompt and a long
// provider message instead of hiding them behind a horizontal scrollbar,
// and does not let a dead letter of class ok read like a success.
func TestBrowserDeadLetterShowsCallsAndWraps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{})
	long := strings.Repeat("the quick brown fox jumps over the lazy dog ", 60)
	token := strings.Repeat("x", 600) // one word longer than any screen
	b.enqueue(t, "b1", workertest.Records(1, func(int) string { return `,"note":"` + long + token + `"` }))
	begin := func(n int) int64 {
		id, err := ledger.BeginAttempt(ctx, b.db.Pool, ledger.Intent{Batch: "b1", RecordID: "r001", Attempt: n, Key: workertest.Key,
			Model: "fake-model", IdempotencyKey: fmt.Sprintf("idem-%d", n), RequestHash: "h", EstCostUSD: 0.002})
		require.NoError(t, err)
		return id
	}
	a1 := begin(1)
	require.NoError(t, ledger.FinishAttempt(ctx, b.db.Pool, a1, ledger.Outcome{Status: ledger.AttemptFailed, Class: classify.Transient,
		HTTPStatus: 503, VendorCode: "overloaded_error", Reason: "overloaded"}))
	a2 := begin(2)
	require.NoError(t, ledger.FinishAttempt(ctx, b.db.Pool, a2, ledger.Outcome{Status: ledger.AttemptOK, Class: classify.OK,
		HTTPStatus: 200, Reason: "invalid_output", InputTokens: 120, OutputTokens: 40, CostUSD: 0.0015}))
	id, err := ledger.AddDeadLetter(ctx, b.db.Pool, ledger.DeadLetterRow{Batch: "b1", RecordID: "r001", Pipeline: workertest.Pipeline,
		Key: workertest.Key, Class: classify.OK, Reason: "invalid_output", HTTPStatus: 200, Attempts: 2,
		Request:      json.RawMessage(`{"messages":[{"role":"user","content":"` + long + token + `"}]}`),
		ErrorExcerpt: "the answer is not JSON: " + long + token})
	require.NoError(t, err)

	tc := tab(t, browserTimeout)
	navigate(t, tc, fmt.Sprintf("%s/dead-letters/%d", b.url, id), `#calls`)
	rows := count(t, tc, `#calls tbody tr`)
	require.Equal(t, 2, rows, "both calls, oldest first")
	first := text(t, tc, `#calls tbody tr:nth-child(1)`)
	for _, want := range []string{"1", "failed", "transient", "overloaded", "503", "overloaded_error", "$0.0000"} {
		require.Contains(t, first, want)
	}
	second := text(t, tc, `#calls tbody tr:nth-child(2)`)
	for _, want := range []string{"2", "ok", "invalid_output", "200", "120/40", "$0.0015"} {
		require.Contains(t, second, want)
	}
	require.Regexp(t, `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`, first, "when the call started")
	require.Contains(t, text(t, tc, `#class`), "not a success", "a dead letter of class ok does not read like a success")

	// Nothing overflows sideways: neither the page nor a <pre>.
	overflow := get(t, tc, chromedp.Evaluate[[]string](`(() => {
		const out = [];
		if (document.documentElement.scrollWidth > window.innerWidth) out.push("page " + document.documentElement.scrollWidth);
		for (const el of document.querySelectorAll("pre, #calls, #dead-letter")) {
			if (el.scrollWidth > el.clientWidth + 1) out.push(el.id + " " + el.scrollWidth + ">" + el.clientWidth);
		}
		return out;
	})()`))
	require.Empty(t, overflow, "long text wraps")
	screenshot(t, tc, "dead-letter-calls")
}

// A key held by its breaker, with no pause row, shows that in the Pause
// column rather than "–".
func TestBrowserKeysPageHeldKeyPause(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.tripKey(t)
	tc := tab(t, browserTimeout)
	row := `#keys tr[data-key="main"]`
	navigate(t, tc, b.url+"/keys", row)
	require.Contains(t, text(t, tc, row+` td.pause`), "held by its breaker")
}

// The batch page sets a batch's budget after a confirmation that asks for
// the amount, as `triage batch budget` does: one transaction that resumes a
// batch paused at its cap; a bad amount changes nothing; a cross-site POST
// is refused.
func TestBrowserBatchPageBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{})
	b.enqueue(t, "b1", workertest.Records(3, nil))
	require.NoError(t, ledger.SetBatchState(ctx, b.db.Pool, "b1", ledger.BatchPausedBudget))
	batch := func() (ledger.Batch, ledger.BatchState) {
		bt, err := ledger.GetBatch(ctx, b.db.Pool, "b1")
		require.NoError(t, err)
		st, err := ledger.BatchStatus(ctx, b.db.Pool, "b1")
		require.NoError(t, err)
		return bt, st.State
	}

	// A cross-site POST changes nothing.
	req, err := http.NewRequest("POST", b.url+"/batches/b1/budget", strings.NewReader(url.Values{"usd": {"9"}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	bt, _ := batch()
	require.Nil(t, bt.BudgetUSD)

	tc := tab(t, browserTimeout)
	navigate(t, tc, b.url+"/batches/b1", `#budget`)
	navigate(t, tc, b.url+"/batches/b1/budget", `#confirm-input`)
	// A bad amount: 400 with the reason, nothing changed.
	run(t, tc, chromedp.SetValue(css(`#confirm-input`), "-3"), chromedp.Click(css(`#confirm-button`)), chromedp.WaitVisible(css(`.notice.error`)))
	require.Contains(t, text(t, tc, `.notice.error`), "want an amount of dollars")
	bt, _ = batch()
	require.Nil(t, bt.BudgetUSD)

	navigate(t, tc, b.url+"/batches/b1/budget", `#confirm-input`)
	// The batch runs again: its page reloads itself.
	run(t, tc, chromedp.SetValue(css(`#confirm-input`), "2.5"), chromedp.Click(css(`#confirm-button`)))
	arrived(t, tc, b.url+"/batches/b1?done=budget", `.notice`)
	got := texts(t, tc, `.notice`, `#batch`)
	require.Contains(t, got[0], "Batch b1 budget set")
	require.Contains(t, got[1], "of a $2.5000 budget")
	bt, state := batch()
	require.NotNil(t, bt.BudgetUSD)
	require.InDelta(t, 2.5, *bt.BudgetUSD, 1e-9)
	require.Equal(t, ledger.BatchRunning, state, "a batch paused at its cap runs again")
	require.Contains(t, b.logs.String(), "alert_kind=batch_budget")
}

// The batch page draws the night: calls per second stacked by class, the
// spend adding up, the key's pace and limit while a worker reports them,
// and the periods a breaker or a pause held the batch, each with its
// times in words, server-side, without JavaScript.
func TestBrowserBatchPageNight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{})
	b.enqueue(t, "b1", workertest.Records(8, nil))
	// A night of 40 minutes: answered calls, a stretch of throttles, the
	// key out of money for ten minutes, then answered calls again.
	call := func(i int, minute int, class classify.Class, cost float64) {
		id, err := ledger.BeginAttempt(ctx, b.db.Pool, ledger.Intent{Batch: "b1", RecordID: fmt.Sprintf("r%03d", i%8+1), Attempt: i + 1,
			Key: workertest.Key, Model: "fake-model", IdempotencyKey: fmt.Sprintf("idem-%d", i), RequestHash: "h", EstCostUSD: 0.01})
		require.NoError(t, err)
		status := ledger.AttemptOK
		if class != classify.OK {
			status = ledger.AttemptFailed
		}
		require.NoError(t, ledger.FinishAttempt(ctx, b.db.Pool, id, ledger.Outcome{Status: status, Class: class, CostUSD: cost}))
		_, err = b.db.Pool.Exec(ctx, `UPDATE triage_attempt SET started_at = now() - make_interval(mins => 40 - $2), finished_at = now() - make_interval(mins => 40 - $2)
			WHERE id = $1`, id, minute)
		require.NoError(t, err)
	}
	n := 0
	for m := 0; m < 10; m++ {
		call(n, m, classify.OK, 0.01)
		n++
	}
	for m := 10; m < 15; m++ {
		call(n, m, classify.Throttled, 0)
		n++
	}
	for m := 26; m < 40; m++ {
		call(n, m, classify.OK, 0.01)
		n++
	}
	_, err := b.db.Pool.Exec(ctx, `INSERT INTO triage_alert (kind, key, batch, message, created_at) VALUES
		('key_exhausted', 'main', '', 'key main exhausted: insufficient_quota', now() - interval '24 minutes'),
		('key_resumed', 'main', '', 'key main resumed by hand', now() - interval '14 minutes'),
		('unknown_error', 'main', 'b1', 'an error no rule knew', now() - interval '20 minutes')`)
	require.NoError(t, err)
	// A worker reports the key's pace and the headers' limit.
	_, err = b.db.Pool.Exec(ctx, `INSERT INTO triage_pacer (key, owner, source, req_rate, limit_requests, remaining_requests, headers_at, expires_at, updated_at)
		VALUES ('main', 'w1', 'headers', 0.5, 120, 100, now(), now() + interval '1 hour', now())`)
	require.NoError(t, err)

	tc := tab(t, browserTimeout)
	navigate(t, tc, b.url+"/batches/b1", `#night`)
	// The page reloads itself while the batch runs: each read is one
	// read of a loaded document (see read).
	counts := read[map[string]int](t, tc, `(() => {
		const n = s => document.querySelectorAll(s).length;
		return {ok: n("#night rect.calls.c-ok"), throttled: n("#night rect.calls.c-throttled"), held: n('#night rect[data-hold="hold-key_held"]'),
			holds: n("#night rect.hold"), spend: n("#night-spend"), pace: n("#night-pace"), limit: n("#night-limit"), scripts: n("script")};
	})()`)
	require.Equal(t, map[string]int{"ok": 24, "throttled": 5, "held": 1, "holds": 1, "spend": 1, "pace": 1, "limit": 1, "scripts": 0}, counts,
		"one bar per bucket and class (per 30 s: 24 answered, 5 throttled), one hold, the spend, pace and limit lines; no script")
	got := texts(t, tc, `#night-legend`, `#night-holds`)
	legend := got[0]
	for _, want := range []string{"29 calls, per 30 s", "ok", "throttled", "spend", "key pace and limit", "key held (exhausted breaker)"} {
		require.Contains(t, legend, want)
	}
	require.Regexp(t, `key held \(exhausted breaker\): \d\d:\d\d:\d\d – \d\d:\d\d:\d\d \(key main exhausted: insufficient_quota\)`, got[1])
	// The hold sits between the throttles and the calls that came back:
	// to the right of the last throttled bar, ending within the bucket of
	// the first answered call after it.
	geom := read[map[string]float64](t, tc, `(() => {
		const x = e => parseFloat(e.getAttribute("x")), w = e => parseFloat(e.getAttribute("width"));
		const hold = document.querySelector('#night rect.hold');
		const thr = [...document.querySelectorAll("#night rect.calls.c-throttled")].map(x);
		const ok = [...document.querySelectorAll("#night rect.calls.c-ok")].map(x);
		const bucket = w(document.querySelector("#night rect.calls"));
		return {holdFrom: x(hold), holdTo: x(hold) + w(hold), lastThrottle: Math.max(...thr), firstLateOK: ok.filter(v => v > x(hold))[0], bucket: bucket};
	})()`)
	require.Greater(t, geom["holdFrom"], geom["lastThrottle"])
	require.LessOrEqual(t, geom["holdTo"], geom["firstLateOK"]+geom["bucket"]+1)
	screenshot(t, tc, "batch-night")

	// The pace a worker recorded over the night (its pace history) is
	// drawn bucket by bucket, in place of the line of the pace now: a past
	// night shows the pace it ran at.
	_, err = b.db.Pool.Exec(ctx, `INSERT INTO triage_pace_history (key, at, source, rate_per_s, limit_per_s)
		SELECT 'main', now() - make_interval(mins => m), 'headers', 0.4, 2 FROM generate_series(20, 38) m`)
	require.NoError(t, err)
	navigate(t, tc, b.url+"/batches/b1", `#night`)
	history := read[map[string]int](t, tc, `(() => {
		const n = s => document.querySelectorAll(s).length;
		const d = document.querySelector("#night-pace-history");
		return {history: n("#night-pace-history"), limitHistory: n("#night-limit-history"), pace: n("#night-pace"), limit: n("#night-limit"),
			levels: d ? d.getAttribute("d").split("M").length - 1 : 0};
	})()`)
	require.Equal(t, 1, history["history"])
	require.Equal(t, 1, history["limitHistory"])
	require.Zero(t, history["pace"]+history["limit"], "the lines of the pace now give way to the history")
	require.Equal(t, 19, history["levels"], "one level per 30 s bucket holding a recorded point (one a minute for 19 minutes), none elsewhere")
	require.Contains(t, texts(t, tc, `#night-legend`)[0], "key pace and limit")

	// A batch with no call yet has no picture.
	b.enqueue(t, "b2", workertest.Records(1, nil))
	navigate(t, tc, b.url+"/batches/b2", `#batch`)
	at := read[map[string]any](t, tc, `({path: location.pathname, night: !!document.querySelector("#night")})`)
	require.Equal(t, map[string]any{"path": "/batches/b2", "night": false}, at)
}
