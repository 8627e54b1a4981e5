package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/operator"
	"github.com/triage-dev/triage/worker/workertest"
)

// browserTimeout bounds one browser test's tab: a deadline for a hang, not a
// wait, so generous (a loaded CI machine took 74 s of the earlier 90).
const browserTimeout = 3 * time.Minute

// The batches page shows a running batch's progress, and refreshes itself
// while it runs.
func TestBrowserBatchesPageShowsRunningProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{})
	b.enqueue(t, "b1", workertest.Records(10, nil))
	// Three records done, as a worker would have stored them; no worker
	// runs, so the batch stays running.
	for _, id := range []string{"r001", "r002", "r003"} {
		att, err := ledger.BeginAttempt(ctx, b.db.Pool, ledger.Intent{Batch: "b1", RecordID: id, Attempt: 1, Key: workertest.Key,
			Model: "fake-model", IdempotencyKey: "idem-" + id, RequestHash: "h"})
		require.NoError(t, err)
		require.NoError(t, ledger.StoreResult(ctx, b.db.Pool, "b1", id, att, json.RawMessage(`{"ok":true}`)))
	}

	tc := tab(t, browserTimeout)
	navigate(t, tc, b.url+"/", `#batches tr[data-batch="b1"]`)
	refresh := read[string](t, tc, `document.querySelector('meta[http-equiv="refresh"]').content`)
	row := text(t, tc, `#batches tr[data-batch="b1"]`)
	require.Contains(t, row, "running")
	require.Regexp(t, `\b3\s+0\s+7\s+10\b`, row, "completed, dead-lettered, pending, total")
	require.Equal(t, "2", refresh, "refreshes while the batch runs")
	screenshot(t, tc, "batches")

	// The batch's link, followed (a click could race the page's reload).
	link := href(t, tc, `#batches tr[data-batch="b1"] a`)
	require.Equal(t, b.url+"/batches/b1", link)
	navigate(t, tc, link, `#batch`)
	// No worker runs: the page says so, and why nothing moves.
	got := texts(t, tc, `#workers`, `#jobs`, `#why`, `.progress-text`)
	require.Equal(t, "3 completed, 0 dead-lettered, 7 pending of 10", got[3])
	require.Equal(t, "none on key main (no live heartbeat)", got[0])
	require.Equal(t, "0 running, 10 queued", got[1])
	require.Contains(t, got[2], "no worker process is working key main")
	require.Equal(t, "no_worker", read[string](t, tc, `document.querySelector("#why").dataset.waitingOn`))
	screenshot(t, tc, "batch")
}

// The batch page of a batch in batch mode shows its deadline, its spend by
// mode with the saving, and a table of its provider batches in flight; the
// batches page says how many it has.
func TestBrowserBatchPageShowsProviderBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{})
	eight, err := config.ParseDeadline("8h")
	require.NoError(t, err)
	require.NoError(t, enqueue.Batch(ctx, b.db.Pool, b.db.Schema, b.cfg, enqueue.Params{Pipeline: workertest.Pipeline,
		Batch: "b1", Records: workertest.Records(4, nil), Deadline: eight}))
	workertest.BatchAttempt(t, b.db.Pool, "b1", "r001", 0.25, 0.5)
	inserted := time.Now()
	workertest.InsertProviderBatch(t, b.db.Pool, workertest.ProviderBatch{Batch: "b1", Records: []string{"r002", "r003"}, Lines: 120,
		ProviderBatchID: "batch_abc", VendorStatus: "in_progress", Counts: `{"total":120,"completed":40,"failed":2}`,
		SubmittedAgo: 90 * time.Minute, ExpiresIn: 22*time.Hour + 30*time.Minute + 30*time.Second})
	workertest.InsertProviderBatch(t, b.db.Pool, workertest.ProviderBatch{Batch: "b1", Records: []string{"r004"},
		Vendor: "anthropic", ProviderBatchID: "msgbatch_xyz", SubmittedAgo: time.Minute})
	// r004's line waits in its provider batch: reserved, not possibly billed.
	_, err = ledger.BeginAttempt(ctx, b.db.Pool, ledger.Intent{Batch: "b1", RecordID: "r004", Attempt: 1, Key: workertest.Key,
		Model: "fake-model", IdempotencyKey: "idem-r004", RequestHash: "h", EstCostUSD: 0.04, Mode: ledger.ModeBatch})
	require.NoError(t, err)
	b.enqueue(t, "b2", workertest.Records(2, nil))
	// The Anthropic batch's last poll failed; and one line is in no provider batch yet.
	_, err = b.db.Pool.Exec(ctx, `UPDATE triage_provider_batch SET last_error = 'batchapi: get: status 404 (not_found_error)'
		WHERE provider_batch_id = 'msgbatch_xyz'`)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `INSERT INTO triage_provider_batch_line (key, job_id, batch, record_id, custom_id, body)
		VALUES ('main', 9201, 'b1', 'r001', 'c-b1-r001', '{}')`)
	require.NoError(t, err)

	tc := tab(t, browserTimeout)
	navigate(t, tc, b.url+"/", `#batches tr[data-batch="b1"]`)
	got := texts(t, tc, `#batches tr[data-batch="b1"]`, `#batches tr[data-batch="b2"]`)
	require.Contains(t, got[0], "2 provider batches in flight")
	require.NotContains(t, got[1], "provider")

	navigate(t, tc, b.url+"/batches/b1", `#provider-batches`)
	require.Equal(t, 2, count(t, tc, `#provider-batches tbody tr`))
	got = texts(t, tc, `#provider-batches tr[data-provider-batch="batch_abc"]`, `#provider-batches tr[data-provider-batch="msgbatch_xyz"]`,
		`#batch-unsent`, `#deadline`, `#by-mode`, `#batch-saved`, `#batch-reserved`)
	shown := time.Since(inserted) // how much older everything is on the page than when it was inserted, at most
	row, xyz := got[0], got[1]
	for _, want := range []string{"batch_abc", "openai", "submitted: in_progress", "total 120, completed 40, failed 2", "2 of 120"} {
		require.Contains(t, row, want)
	}
	// Its age and the time left, to the minute, as old as the page is.
	ages := regexp.MustCompile(`\t(\d+h(?:\d+m)?)\t(\d+h(?:\d+m)?)$`).FindStringSubmatch(row)
	require.NotNil(t, ages, row)
	requireMinutesWithin(t, ages[1], 90*time.Minute, 90*time.Minute+shown)
	requireMinutesWithin(t, ages[2], 22*time.Hour+30*time.Minute+30*time.Second-shown, 22*time.Hour+30*time.Minute+30*time.Second)
	require.Contains(t, xyz, "anthropic")
	require.Contains(t, xyz, "the last request about it failed, retrying with backoff: batchapi: get: status 404 (not_found_error)")
	require.NotContains(t, row, "failed, retrying")
	require.True(t, strings.HasPrefix(got[2], "1 line "), got[2])
	require.Regexp(t, `\(in 7h5\dm\)$`, got[3])
	require.Equal(t, "sync $0.0000 for 0 calls; batch $0.2500 for 2 lines ($0.5000 at sync prices)", got[4], "the line in flight counts as a line")
	require.Equal(t, "$0.2500", got[5])
	require.True(t, strings.HasPrefix(got[6], "$0.0400 "), got[6])
	screenshot(t, tc, "batch-provider-batches")

	// A sync-only batch's page has none of it.
	navigate(t, tc, b.url+"/batches/b2", `#batch`)
	missing := read[bool](t, tc, `!document.querySelector("#provider-batches, #deadline, #by-mode, #batch-saved, #batch-reserved, #batch-unsent")`)
	require.True(t, missing)

	// ?format=json is `triage status B --json`, with the new fields.
	resp, err := http.Get(b.url + "/batches/b1?format=json")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st ledger.Status
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	require.Len(t, st.ProviderBatches, 2)
	require.Equal(t, "batch_abc", *st.ProviderBatches[0].ProviderBatchID)
	require.Equal(t, 2, st.ProviderBatches[0].BatchLines)
	require.NotNil(t, st.Deadline)
	require.Equal(t, 0.25, *st.BatchSavedUSD)
	require.InDelta(t, 0.04, st.BatchReservedUSD, 1e-12)
	require.Zero(t, st.PossiblyBilledUSD, "a line in a provider batch is not possibly billed")
}

// The pages of a running batch reload themselves, and a test cannot know
// when: here they reload as soon as they have loaded, every time, and the
// browser helpers still open them, read them and follow their links.
// (Before the helpers waited for a loaded document of the page they opened,
// a step of a loaded CI run now and then failed: "page load error
// net::ERR_ABORTED".)
func TestBrowserSelfReloadingPages(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{reloadAtOnce: true})
	b.enqueue(t, "b1", workertest.Records(3, nil))
	b.enqueue(t, "b2", workertest.Records(2, nil))

	tc := tab(t, browserTimeout)
	for range 2 {
		navigate(t, tc, b.url+"/", `#batches tr[data-batch="b1"]`)
		require.Equal(t, "0", read[string](t, tc, `document.querySelector('meta[http-equiv="refresh"]').content`), "reloads at once")
		got := texts(t, tc, `#batches tr[data-batch="b1"]`, `#batches tr[data-batch="b2"]`)
		require.Regexp(t, `\b0\s+0\s+3\s+3\b`, got[0], "completed, dead-lettered, pending, total")
		require.Regexp(t, `\b0\s+0\s+2\s+2\b`, got[1])

		link := href(t, tc, `#batches tr[data-batch="b2"] a`)
		require.Equal(t, b.url+"/batches/b2", link)
		navigate(t, tc, link, `#batch`)
		require.Equal(t, "0 running, 2 queued", text(t, tc, `#jobs`))

		navigate(t, tc, b.url+"/batches/b1", `#batch`)
		require.Equal(t, []string{"0 running, 3 queued", "/batches/b1"}, read[[]string](t, tc, `[document.querySelector("#jobs").innerText, location.pathname]`))
	}
	screenshot(t, tc, "batch-reloading")
}

// requireMinutesWithin checks a duration shown to the minute ("1h30m"):
// between lo and hi, both truncated to the minute as the page does.
func requireMinutesWithin(t *testing.T, shown string, lo, hi time.Duration) {
	t.Helper()
	d, err := time.ParseDuration(shown)
	require.NoError(t, err)
	require.True(t, d >= lo.Truncate(time.Minute) && d <= hi.Truncate(time.Minute), "%s not within [%s, %s]", shown, lo, hi)
}

// The dead-letter page lists a batch's poisoned records, the filters narrow
// it, and a requeue through the page requeues exactly the selected records,
// once.
func TestBrowserDeadLettersFilterAndRequeue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{scenario: fakeprovider.Scenario{
		Poison:        fakeprovider.Poison{InvalidMarker: "POISON_INVALID"},
		RecordScripts: map[string][]fakeprovider.Step{"r005": {{Action: fakeprovider.ActionGarbage}}},
	}})
	poisoned := func(ids ...int) func(int) string {
		return func(i int) string {
			for _, id := range ids {
				if i+1 == id {
					return `,"note":"POISON_INVALID"`
				}
			}
			return ""
		}
	}
	b.enqueue(t, "b1", workertest.Records(8, poisoned(2, 3, 7)))
	b.enqueue(t, "b2", workertest.Records(3, poisoned(1)))
	b.work(t, "b1", "b2")

	tc := tab(t, browserTimeout)
	navigate(t, tc, b.url+"/dead-letters", `#dead-letters`)
	rows := count(t, tc, `#dead-letters tbody tr`)
	require.Equal(t, 5, rows, "3 poisoned and 1 garbage in b1, 1 poisoned in b2")

	// Filter: batch b1, class rejected.
	run(t, tc,
		chromedp.SetValue(css(`#filters select[name=batch]`), "b1"),
		chromedp.SetValue(css(`#filters select[name=class]`), "rejected"),
		chromedp.Click(css(`#filters button[type=submit]`)),
		chromedp.WaitVisible(css(`#groups a.button`)))
	location := get(t, tc, chromedp.Location())
	rows = count(t, tc, `#dead-letters tbody tr`)
	require.Contains(t, location, "/dead-letters?batch=b1&class=rejected")
	require.Equal(t, 3, rows)
	for _, r := range []string{"r002", "r003", "r007"} {
		require.Contains(t, text(t, tc, `#dead-letters tbody`), r)
	}
	screenshot(t, tc, "dead-letters")

	// The detail page of one of them.
	dls, err := ledger.ListDeadLetters(ctx, b.db.Pool, ledger.DeadLetterFilter{Batch: "b1", Class: "rejected"})
	require.NoError(t, err)
	byRecord := map[string]ledger.DeadLetter{}
	for _, dl := range dls {
		byRecord[dl.RecordID] = dl
	}
	run(t, tc, chromedp.Click(css(fmt.Sprintf(`#dead-letters a[href="/dead-letters/%d"]`, byRecord["r002"].ID))),
		chromedp.WaitVisible(css(`#dead-letter`)))
	require.Contains(t, text(t, tc, `#record`), "POISON_INVALID")
	require.Contains(t, text(t, tc, `#request`), `"model"`)
	require.Contains(t, text(t, tc, `#dead-letter`), "400")
	require.NotContains(t, text(t, tc, `body`), workertest.APIKey, "no API key on the page")
	screenshot(t, tc, "dead-letter")

	// Select r002 and r007, requeue, confirm.
	before := b.jobsOf(t)
	navigate(t, tc, location, `#dead-letters`)
	run(t, tc,
		chromedp.Click(css(`#dead-letters tr[data-record="r002"] input[type=checkbox]`)),
		chromedp.Click(css(`#dead-letters tr[data-record="r007"] input[type=checkbox]`)),
		chromedp.Click(css(`#requeue-selected`)),
		chromedp.WaitVisible(css(`#confirm-button`)))
	confirm := text(t, tc, `#confirm-items`)
	require.Contains(t, confirm, "record r002")
	require.Contains(t, confirm, "record r007")
	require.NotContains(t, confirm, "record r003")
	require.Equal(t, before, b.jobsOf(t), "the confirmation step changes nothing")
	screenshot(t, tc, "requeue-confirm")
	confirmURL := get(t, tc, chromedp.Location())
	run(t, tc, chromedp.Click(css(`#confirm-button`)), chromedp.WaitVisible(css(`.notice`)))
	require.Contains(t, text(t, tc, `.notice`), "Requeued 2 records")

	after := b.jobsOf(t)
	for k, n := range before {
		want := n
		if k == "b1/r002" || k == "b1/r007" {
			want = n + 1
		}
		require.Equal(t, want, after[k], "jobs of %s", k)
	}
	for _, r := range []string{"r002", "r003", "r007"} {
		dl, err := ledger.GetDeadLetter(ctx, b.db.Pool, byRecord[r].ID)
		require.NoError(t, err)
		require.Equal(t, r != "r003", dl.RequeuedAt != nil, "requeued: %s", r)
	}
	require.Contains(t, b.logs.String(), "alert_kind=dead_letters_requeued")
	// The alert names the dead letters in id order, whichever was ticked first.
	ids := []int64{byRecord["r002"].ID, byRecord["r007"].ID}
	slices.Sort(ids)
	require.Contains(t, b.logs.String(), fmt.Sprintf("dead_letter_ids=\"%d %d\"", ids[0], ids[1]))

	// The same confirmation submitted again requeues nothing twice.
	navigate(t, tc, confirmURL, `#confirm-button`)
	run(t, tc, chromedp.Click(css(`#confirm-button`)), chromedp.WaitVisible(css(`.notice`)))
	require.Contains(t, text(t, tc, `.notice`), "Requeued 0 records")
	require.Equal(t, after, b.jobsOf(t))
}

// The dead-letters page, where records are ticked for a requeue, does not
// reload itself while a batch runs: a reload cleared the ticks under the
// operator. (Before: the ticked record came back unticked after the
// page's reload, "the tick survives the page's reload".)
func TestBrowserDeadLettersPageKeepsTicks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{})
	b.enqueue(t, "b1", workertest.Records(3, nil))
	_, err := ledger.AddDeadLetter(ctx, b.db.Pool, ledger.DeadLetterRow{Batch: "b1", RecordID: "r001", Pipeline: workertest.Pipeline,
		Key: workertest.Key, Class: classify.Rejected, Reason: "invalid_request", HTTPStatus: 400, Attempts: 1, Request: json.RawMessage(`{}`)})
	require.NoError(t, err)

	tc := tab(t, browserTimeout)
	box := `#dead-letters tr[data-record="r001"] input[type=checkbox]`
	navigate(t, tc, b.url+"/dead-letters", box)
	run(t, tc, chromedp.Click(css(box)))
	got := read[map[string]any](t, tc, `({ticked: document.querySelector(`+jsonString(box)+`).checked,
		reloads: !!document.querySelector('meta[http-equiv="refresh"]'), footer: document.querySelector("footer").innerText})`)
	require.Equal(t, true, got["ticked"])
	require.Equal(t, false, got["reloads"], "no self-reload while b1 runs")
	require.NotContains(t, got["footer"], "refreshes")
	// The batch's own page still reloads itself while it runs.
	navigate(t, tc, b.url+"/batches/b1", `#batch`)
	require.Equal(t, "2", read[string](t, tc, `document.querySelector('meta[http-equiv="refresh"]').content`))
}

// The keys page shows an open breaker, and Resume (confirmed) closes it.
func TestBrowserKeysPageResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{})
	b.tripKey(t)

	tc := tab(t, browserTimeout)
	row := `#keys tr[data-key="main"]`
	navigate(t, tc, b.url+"/keys", row)
	require.Contains(t, text(t, tc, row+` .breaker[data-breaker="exhausted"]`), "open")
	require.Contains(t, text(t, tc, row+` .breaker[data-breaker="exhausted"]`), "insufficient_quota")
	screenshot(t, tc, "keys")

	run(t, tc, chromedp.Click(css(row+` a.button`)), chromedp.WaitVisible(css(`#confirm-button`)))
	st, err := keys.DefaultStore(b.db.Pool).KeyStatus(ctx, workertest.Key)
	require.NoError(t, err)
	require.Equal(t, keys.StateOpen, st.State, "the confirmation step changes nothing")

	run(t, tc, chromedp.Click(css(`#confirm-button`)), chromedp.WaitVisible(css(`.notice`)))
	require.Contains(t, text(t, tc, row+` .breaker[data-breaker="exhausted"]`), "closed")
	st, err = keys.DefaultStore(b.db.Pool).KeyStatus(ctx, workertest.Key)
	require.NoError(t, err)
	require.Equal(t, keys.StateClosed, st.State)
	require.Contains(t, b.logs.String(), "alert_kind=key_resumed")
	require.Contains(t, b.logs.String(), "by=web")
	screenshot(t, tc, "keys-resumed")
}

// River UI is served under /riverui/ and its job list loads the queue's jobs.
func TestBrowserRiverUIJobList(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.enqueue(t, "b1", workertest.Records(3, nil))

	tc := tab(t, browserTimeout)
	run(t, tc, chromedp.Navigate(b.url+"/riverui/jobs?state=available"))
	get(t, tc, chromedp.Poll[bool](`document.body.innerText.includes("`+jobargs.Kind+`")`, chromedp.WithPollingTimeout(time.Minute)))
	screenshot(t, tc, "riverui")
}

// Every page answers ?format=json with the CLI's --json shapes.
func TestPagesJSONShapes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{scenario: fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON_INVALID"}}})
	b.enqueue(t, "b1", workertest.Records(3, func(i int) string {
		if i == 1 {
			return `,"note":"POISON_INVALID"`
		}
		return ""
	}))
	b.work(t, "b1")

	get := func(path string, status int) []byte {
		t.Helper()
		resp, err := http.Get(b.url + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, status, resp.StatusCode, "%s: %s", path, body)
		require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
		return body
	}
	asJSON := func(v any) string {
		t.Helper()
		out, err := json.MarshalIndent(v, "", "  ")
		require.NoError(t, err)
		return string(out) + "\n"
	}

	st, err := ledger.BatchStatus(ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	v, err := operator.GetBatchNow(ctx, b.db.Pool, "b1", operator.ActivityOptions{Schema: b.db.Schema, Config: b.cfg})
	require.NoError(t, err)
	require.Equal(t, asJSON([]operator.BatchNow{{Status: st, Activity: v.Activity}}), string(get("/?format=json", 200)),
		"`triage status --json`: every batch with its activity")
	require.Equal(t, asJSON(operator.BatchNow{Status: st, Activity: v.Activity}), string(get("/batches/b1?format=json", 200)),
		"`triage status B --json`: the status and its activity")
	require.Equal(t, operator.Activity{}, *v.Activity, "settled: nothing works it, nothing waits")
	get("/batches/nope?format=json", 404)

	dls, err := ledger.ListDeadLetters(ctx, b.db.Pool, ledger.DeadLetterFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, dls, 1)
	require.Equal(t, asJSON(operator.ListItems(dls)), string(get("/dead-letters?batch=b1&format=json", 200)))
	require.Equal(t, "[]\n", string(get("/dead-letters?batch=b1&class=ok&format=json", 200)))
	require.Equal(t, "[]\n", string(get("/dead-letters?batch=b1&unknown=1&format=json", 200)))
	// r001 ends as a dead letter of an unknown error instead of its result
	// (a record with a result is never dead-lettered).
	_, err = b.db.Pool.Exec(ctx, `DELETE FROM triage_result WHERE batch = 'b1' AND record_id = 'r001'`)
	require.NoError(t, err)
	unknownID, err := ledger.AddDeadLetter(ctx, b.db.Pool, ledger.DeadLetterRow{Batch: "b1", RecordID: "r001", Pipeline: workertest.Pipeline,
		Key: workertest.Key, Class: classify.Rejected, Reason: "unknown_4xx", HTTPStatus: 418, Attempts: 1, Rule: "generic/unknown_4xx", Unknown: true})
	require.NoError(t, err)
	var unknown []ledger.DeadLetterListItem
	require.NoError(t, json.Unmarshal(get("/dead-letters?batch=b1&unknown=1&format=json", 200), &unknown))
	require.Len(t, unknown, 1)
	require.Equal(t, unknownID, unknown[0].ID)
	get("/dead-letters?class=bogus&format=json", 400)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(get(fmt.Sprintf("/dead-letters/%d?format=json", dls[0].ID), 200), &fields))
	for _, k := range []string{"id", "batch", "record_id", "class", "reason", "status", "code", "attempts", "created_at",
		"job_id", "pipeline", "key", "request", "error_excerpt", "requeued_at", "rule", "known", "record"} {
		require.Contains(t, fields, k)
	}
	views, err := operator.KeyViews(ctx, b.db.Pool, b.cfg, decide.RetryBudgetDefault)
	require.NoError(t, err)
	require.Equal(t, asJSON(views), string(get("/keys?format=json", 200)))
}

// A token is required on every request when set: bearer or basic-auth
// password; anything else is 401.
func TestTokenRequired(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{token: "s3cret"})
	for _, c := range []struct {
		name   string
		auth   func(*http.Request)
		status int
	}{
		{"none", func(*http.Request) {}, 401},
		{"wrong bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, 401},
		{"wrong password", func(r *http.Request) { r.SetBasicAuth("me", "nope") }, 401},
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret") }, 200},
		{"basic", func(r *http.Request) { r.SetBasicAuth("anyone", "s3cret") }, 200},
	} {
		for _, path := range []string{"/", "/keys?format=json", "/riverui/"} {
			req, err := http.NewRequest("GET", b.url+path, nil)
			require.NoError(t, err)
			c.auth(req)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, c.status, resp.StatusCode, "%s %s", c.name, path)
			if c.status == 401 {
				require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Basic")
			}
		}
	}
}

// A cross-site form POST is refused and changes nothing.
func TestCrossSitePostRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.tripKey(t)
	req, err := http.NewRequest("POST", b.url+"/keys/main/resume", strings.NewReader(""))
	require.NoError(t, err)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	st, err := keys.DefaultStore(b.db.Pool).KeyStatus(context.Background(), workertest.Key)
	require.NoError(t, err)
	require.Equal(t, keys.StateOpen, st.State)
}

// A filtered group is requeued through the same POST; a dead letter whose
// job is still live is refused with 409 and nothing changes.
func TestRequeueGroupAndLiveJobRefusal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{scenario: fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON_INVALID"}}})
	b.enqueue(t, "b1", workertest.Records(4, func(i int) string {
		if i%2 == 0 {
			return `,"note":"POISON_INVALID"`
		}
		return ""
	}))
	b.work(t, "b1")
	post := func(form url.Values) (int, map[string]any) {
		t.Helper()
		resp, err := http.PostForm(b.url+"/dead-letters/requeue?format=json", form)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}

	code, out := post(url.Values{"batch": {"b1"}, "class": {"rejected"}})
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, float64(2), out["requeued"])
	code, out = post(url.Values{"batch": {"b1"}, "class": {"rejected"}})
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, float64(0), out["requeued"], "nothing left to requeue: once")

	// A dead letter written while its job is still live (the cancel lost).
	b.enqueue(t, "b2", workertest.Records(1, nil))
	jobs, err := b.rc.JobList(ctx, river.NewJobListParams().States(rivertype.JobStateAvailable))
	require.NoError(t, err)
	var jobID int64
	for _, j := range jobs.Jobs {
		var a jobargs.Args
		require.NoError(t, json.Unmarshal(j.EncodedArgs, &a))
		if a.Batch == "b2" {
			jobID = j.ID
		}
	}
	require.NotZero(t, jobID)
	id, err := ledger.AddDeadLetter(ctx, b.db.Pool, ledger.DeadLetterRow{Batch: "b2", RecordID: "r001", JobID: jobID,
		Pipeline: workertest.Pipeline, Key: workertest.Key, Class: classify.Rejected, Reason: "bad_request", Attempts: 1})
	require.NoError(t, err)
	code, out = post(url.Values{"id": {strconv.FormatInt(id, 10)}})
	require.Equal(t, http.StatusConflict, code, out)
	require.Contains(t, out["error"], "still live")
	dl, err := ledger.GetDeadLetter(ctx, b.db.Pool, id)
	require.NoError(t, err)
	require.Nil(t, dl.RequeuedAt)
}

// The dead-letter page shows which dead letters are suspect, filters on
// them, and requeues just those, as `triage dlq requeue --suspect` does.
func TestDeadLettersPageSuspect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	weak := fakeprovider.Step{Status: 400, Body: json.RawMessage(
		`{"error":{"message":"Input data may contain inappropriate content.","code":"dif_1185"}}`)}
	b := setup(t, setupOpts{scenario: fakeprovider.Scenario{Poison: fakeprovider.Poison{ContextTokens: 2000},
		RecordScripts: map[string][]fakeprovider.Step{"r003": {weak}}}})
	b.enqueue(t, "b1", workertest.Records(4, func(i int) string {
		if i == 0 {
			return `,"note":"` + strings.Repeat("far too long for the model ", 1500) + `"`
		}
		return ""
	}))
	b.work(t, "b1")
	dls, err := ledger.ListDeadLetters(ctx, b.db.Pool, ledger.DeadLetterFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, dls, 2)
	var sure ledger.DeadLetter
	for _, dl := range dls {
		if dl.RecordID == "r001" {
			sure = dl
		}
	}
	require.Empty(t, sure.Suspect, "context_length, a vendor rule: %+v", sure)

	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(b.url + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		return string(body)
	}
	var only []map[string]any
	require.NoError(t, json.Unmarshal([]byte(get("/dead-letters?suspect=1&format=json")), &only))
	require.Len(t, only, 1)
	require.Equal(t, "signal", only[0]["suspect"])
	page := get("/dead-letters")
	require.Contains(t, page, "<th>Suspect</th>")
	require.Contains(t, page, ">signal<")
	require.Contains(t, get("/dead-letters/requeue?suspect=1"), "dlq requeue --suspect")

	resp, err := http.PostForm(b.url+"/dead-letters/requeue?format=json", url.Values{"suspect": {"1"}})
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, http.StatusOK, resp.StatusCode, out)
	require.Equal(t, float64(1), out["requeued"])
	left, err := ledger.ListDeadLetters(ctx, b.db.Pool, ledger.DeadLetterFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, sure.ID, left[0].ID, "the sure dead letter stays")
}

// The batch page pauses, resumes and cancels a batch, each after a
// confirmation page, as `triage batch pause|resume|cancel` do, and says so.
func TestBrowserBatchPageControls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{})
	b.enqueue(t, "b1", workertest.Records(3, nil))
	state := func() ledger.BatchState {
		st, err := ledger.BatchStatus(ctx, b.db.Pool, "b1")
		require.NoError(t, err)
		return st.State
	}

	tc := tab(t, browserTimeout)
	// A running batch's page reloads itself: the buttons are checked, then
	// their links followed, rather than clicked mid-reload.
	navigate(t, tc, b.url+"/batches/b1", `#pause`)
	require.Equal(t, 1, count(t, tc, `#cancel`))
	navigate(t, tc, b.url+"/batches/b1/pause", `#confirm-button`)
	require.Equal(t, ledger.BatchRunning, state(), "the confirmation step changes nothing")
	run(t, tc, chromedp.Click(css(`#confirm-button`)), chromedp.WaitVisible(css(`.notice`)))
	require.Contains(t, text(t, tc, `.notice`), "Batch b1 paused")
	require.Equal(t, ledger.BatchPaused, state())
	require.Contains(t, b.logs.String(), "alert_kind=batch_paused")

	run(t, tc, chromedp.Click(css(`#resume`)), chromedp.WaitVisible(css(`#confirm-button`)))
	// Resumed, the batch runs: its page reloads itself again.
	run(t, tc, chromedp.Click(css(`#confirm-button`)))
	arrived(t, tc, b.url+"/batches/b1?done=resume", `.notice`)
	require.Equal(t, ledger.BatchRunning, state())

	navigate(t, tc, b.url+"/batches/b1/cancel", `#confirm-button`)
	run(t, tc, chromedp.Click(css(`#confirm-button`)), chromedp.WaitVisible(css(`.notice`)))
	require.Contains(t, text(t, tc, `.notice`), "Batch b1 cancelled")
	require.Equal(t, ledger.BatchSettled, state(), "its three queued records are dead-lettered cancelled")
	require.Contains(t, b.logs.String(), "alert_kind=batch_cancelled")
	require.Contains(t, b.logs.String(), "by=web")
	screenshot(t, tc, "batch-cancelled")
}

// The keys page explains itself: what each breaker and its states mean,
// and what each column is, on the page, without the README.
func TestKeysPageExplainsItsColumns(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	resp, err := http.Get(b.url + "/keys")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	page := string(body)
	require.Contains(t, page, `id="keys-help"`)
	for _, s := range []string{
		"<dt>exhausted</dt>", "<dt>storm</dt>", // the two breakers
		"<dt>closed</dt>", "<dt>open</dt>", "<dt>half_open</dt>", // their states
		"<dt>Pause</dt>", "<dt>Concurrency</dt>", "<dt>Spend</dt>", "<dt>Prepaid</dt>",
		"<dt>Retry budget</dt>", "<dt>Safety net</dt>", "<dt>Resume…</dt>",
	} {
		require.Contains(t, page, s)
	}
}
