package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
)

func init() {
	register(command{
		name:    "keys",
		summary: "show each key's breaker, pause, concurrency and spend; `keys resume KEY` resumes one by hand",
		run:     runKeys,
	})
}

// keyView is one element of `triage keys --json` (a contract: add fields,
// never rename or remove them). Times are RFC 3339; null means "none".
type keyView struct {
	Key        string  `json:"key"`
	Configured bool    `json:"configured"` // in triage.toml; false: only state in the database
	Vendor     *string `json:"vendor"`
	Queue      string  `json:"queue"` // the key's River queue
	// State is the breaker: closed, open or half_open.
	State     keys.State `json:"state"`
	Reason    *string    `json:"reason"`     // why the breaker opened
	OpenedAt  *time.Time `json:"opened_at"`  // when it opened
	NextProbe *time.Time `json:"next_probe"` // open: when the next probe may go
	// Paused: an active pause (throttled, exhausted, ...) stops fetching.
	Paused      bool       `json:"paused"`
	PauseReason *string    `json:"pause_reason"`
	PausedUntil *time.Time `json:"paused_until"`
	// ConcurrencyPerProcess is the configured ceiling of calls in flight on
	// the key in each worker process (the AIMD limiter lives in the process,
	// so the live value is not visible from here); null when not configured.
	ConcurrencyPerProcess *int `json:"concurrency_per_process"`
	// SpendUSD is everything the ledger has billed under the key.
	SpendUSD float64 `json:"spend_usd"`
	// PrepaidUSD is prepaid_usd from triage.toml, null when unset (0).
	PrepaidUSD *float64 `json:"prepaid_usd"`
	// PrepaidUsedPct is SpendUSD as a percentage of PrepaidUSD (2 decimals),
	// null without PrepaidUSD.
	PrepaidUsedPct *float64 `json:"prepaid_used_pct"`
	// RetryBudget is the fleet retry budget in use; null for a key not in
	// the configuration (its retry_budget is unknown).
	RetryBudget *retryBudgetView `json:"retry_budget"`
	// Pacing is the key's pace as its live worker processes report it
	// (heartbeat rows); null when no worker process is working the key.
	Pacing *pacingView `json:"pacing"`
}

// pacingView is how a key is paced, fleet-wide (keys.PacingStatus).
type pacingView struct {
	// LiveProcesses is the worker processes with a live heartbeat.
	LiveProcesses int `json:"live_processes"`
	// Source: "headers" (the provider's rate-limit headers), "throttles"
	// (learned from 429s) or "starting" (still looking for the limit).
	Source string `json:"source"`
	// RatePerS is the requests per second the fleet paces the key at, null
	// when not limited; SharePerProcessPerS is RatePerS / LiveProcesses.
	RatePerS            *float64 `json:"rate_per_s"`
	SharePerProcessPerS *float64 `json:"share_per_process_per_s"`
	// TokensPerS is the input tokens per second the fleet paces at, null
	// when no token limit is known.
	TokensPerS *float64 `json:"tokens_per_s"`
	// Throttles counts the 429s that lowered the rate, summed over the live
	// processes.
	Throttles int64 `json:"throttles"`
	// The last rate-limit headers any live process saw (limits per the
	// vendor's window, usually a minute); null: none seen.
	LimitRequests     *int64     `json:"limit_requests"`
	RemainingRequests *int64     `json:"remaining_requests"`
	LimitTokens       *int64     `json:"limit_tokens"`
	RemainingTokens   *int64     `json:"remaining_tokens"`
	HeadersAt         *time.Time `json:"headers_at"`
}

func newPacingView(ps keys.PacingStatus) *pacingView {
	v := &pacingView{LiveProcesses: ps.Live, Source: string(ps.Source), Throttles: ps.Throttles,
		LimitRequests: ps.LimitRequests, RemainingRequests: ps.RemainingRequests,
		LimitTokens: ps.LimitTokens, RemainingTokens: ps.RemainingTokens, HeadersAt: ps.HeadersAt}
	round := func(f float64) *float64 {
		r := math.Round(f*100) / 100
		return &r
	}
	if ps.RatePerS > 0 {
		v.RatePerS, v.SharePerProcessPerS = round(ps.RatePerS), round(ps.ShareRatePerS)
	}
	if ps.TokensPerS > 0 {
		v.TokensPerS = round(ps.TokensPerS)
	}
	return v
}

// retryBudgetView is the fleet-wide retry budget of a key over the sliding
// window, as the worker computes it (worker's overRetryBudget): a retry may
// go while OpenRetries < Allowed.
type retryBudgetView struct {
	// Share is the key's retry_budget: retries at most this share of first
	// calls. 0: transient failures are not retried at all.
	Share float64 `json:"share"`
	// WindowS is the sliding window in seconds (worker.RetryWindowDefault).
	WindowS float64 `json:"window_s"`
	// Floor is the retries allowed however few first calls there were
	// (worker.RetryFloorDefault).
	Floor int `json:"floor"`
	// FirstCalls and OpenRetries are counted over the window; a retry that
	// succeeded is no longer open.
	FirstCalls  int `json:"first_calls"`
	OpenRetries int `json:"open_retries"`
	// Allowed is max(Floor, Share × FirstCalls) rounded up (0 when Share
	// is 0): the open retries at which further retries wait.
	Allowed int `json:"allowed"`
	// Spent: OpenRetries has reached Allowed; retries wait (snoozed) until
	// some succeed or leave the window.
	Spent bool `json:"spent"`
}

// newRetryBudgetView applies the worker's rule to a key's usage.
func newRetryBudgetView(share float64, u ledger.RetryUsage) *retryBudgetView {
	v := &retryBudgetView{Share: share, WindowS: worker.RetryWindowDefault.Seconds(), Floor: worker.RetryFloorDefault,
		FirstCalls: u.FirstCalls, OpenRetries: u.OpenRetries}
	v.Allowed = worker.RetryAllowance(share, u.FirstCalls, v.Floor)
	v.Spent = v.OpenRetries >= v.Allowed
	return v
}

func runKeys(ctx context.Context, e *env, args []string) int {
	if len(args) > 0 && args[0] == "resume" {
		return runKeysResume(ctx, e, args[1:])
	}
	const cmd = "keys"
	fs := flag.NewFlagSet("triage keys", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	asJSON := fs.Bool("json", false, "print a JSON array")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: triage keys [--json]\n       triage keys resume KEY")
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) > 0 {
		return failCmd(e, cmd, usageError{fmt.Errorf("unexpected argument %q (did you mean `triage keys resume %s`?)", pos[0], pos[0])})
	}
	cfg, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer d.Close()
	views, err := keyViews(ctx, d.pool, cfg)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	if *asJSON {
		if err := writeJSONIndented(e.stdout, views); err != nil {
			return failCmd(e, cmd, err)
		}
		return exitOK
	}
	writeKeys(e.stdout, views)
	return exitOK
}

// keyViews lists the configured keys in file order, then any other key with
// breaker or pause state in the database, by name.
func keyViews(ctx context.Context, pool *pgxpool.Pool, cfg *config.Config) ([]keyView, error) {
	store := keys.NewStore(pool, keys.StoreConfig{})
	states, err := store.ListKeyStatus(ctx)
	if err != nil {
		return nil, err
	}
	byKey := map[string]keys.KeyStatus{}
	for _, st := range states {
		byKey[st.Key] = st
	}
	pacing, err := store.ListPacing(ctx)
	if err != nil {
		return nil, err
	}
	paceByKey := map[string]keys.PacingStatus{}
	for _, ps := range pacing {
		paceByKey[ps.Key] = ps
	}
	now := time.Now()    // the worker's retry window runs on its clock too
	views := []keyView{} // [] when empty, never null
	seen := map[string]bool{}
	add := func(name string, k *config.Key) error {
		seen[name] = true
		st, ok := byKey[name]
		if !ok {
			st = keys.KeyStatus{Key: name, State: keys.StateClosed}
		}
		v := keyView{Key: name, Queue: keys.QueueName(name), State: st.State, OpenedAt: st.OpenedAt}
		if st.State == keys.StateOpen {
			v.NextProbe = st.NextProbe
		}
		if st.Reason != "" {
			v.Reason = &st.Reason
		}
		if p := st.Pause; p != nil {
			v.Paused, v.PauseReason, v.PausedUntil = true, &p.Reason, &p.Until
		}
		spend, err := ledger.SpendByKey(ctx, pool, name, time.Time{})
		if err != nil {
			return err
		}
		v.SpendUSD = spend
		if ps, ok := paceByKey[name]; ok {
			v.Pacing = newPacingView(ps)
		}
		if k != nil {
			u, err := ledger.RetryUsageByKey(ctx, pool, name, now.Add(-worker.RetryWindowDefault))
			if err != nil {
				return err
			}
			v.RetryBudget = newRetryBudgetView(k.RetryBudget, u)
			v.Configured, v.Vendor = true, &k.Vendor
			conc := k.Concurrency
			v.ConcurrencyPerProcess = &conc
			if k.PrepaidUSD > 0 {
				prepaid := k.PrepaidUSD
				pct := math.Round(spend/prepaid*100*100) / 100
				v.PrepaidUSD, v.PrepaidUsedPct = &prepaid, &pct
			}
		}
		views = append(views, v)
		return nil
	}
	if cfg != nil {
		for i := range cfg.Keys {
			if err := add(cfg.Keys[i].Name, &cfg.Keys[i]); err != nil {
				return nil, err
			}
		}
	}
	for _, st := range states { // ListKeyStatus is ordered by key
		if !seen[st.Key] {
			if err := add(st.Key, nil); err != nil {
				return nil, err
			}
		}
	}
	for _, ps := range pacing { // ListPacing is ordered by key
		if !seen[ps.Key] {
			if err := add(ps.Key, nil); err != nil {
				return nil, err
			}
		}
	}
	return views, nil
}

func writeKeys(w io.Writer, views []keyView) {
	if len(views) == 0 {
		fmt.Fprintln(w, "no keys configured and none with state in the database")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVENDOR\tBREAKER\tREASON\tOPENED\tNEXT PROBE\tPAUSE\tCONCURRENCY\tSPEND\tPREPAID\tRETRIES")
	for _, v := range views {
		vendor := "(not in config)"
		if v.Vendor != nil {
			vendor = *v.Vendor
		}
		pause := "-"
		if v.Paused {
			pause = *v.PauseReason + " until " + keysTime(v.PausedUntil)
		}
		conc := "-"
		if v.ConcurrencyPerProcess != nil {
			conc = strconv.Itoa(*v.ConcurrencyPerProcess) + " max per process"
		}
		prepaid := "-"
		if v.PrepaidUSD != nil {
			prepaid = fmt.Sprintf("$%.2f (%.1f %% used)", *v.PrepaidUSD, *v.PrepaidUsedPct)
		}
		reason := "-"
		if v.Reason != nil {
			reason = *v.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t$%.4f\t%s\t%s\n", v.Key, vendor, v.State, reason,
			keysTime(v.OpenedAt), keysTime(v.NextProbe), pause, conc, v.SpendUSD, prepaid, keysRetries(v.RetryBudget))
	}
	tw.Flush()
	var notes []string
	for _, v := range views {
		notes = append(notes, keysNotes(v)...)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
	for _, v := range views {
		if v.State != keys.StateClosed || v.Paused {
			fmt.Fprintln(w, "\nafter a top-up or a fix, `triage keys resume KEY` closes the breaker and ends the pause at once (workers resume the queue within a tick)")
			break
		}
	}
}

// keysRetries is the RETRIES cell: open retries of those allowed over the
// window.
func keysRetries(rb *retryBudgetView) string {
	switch {
	case rb == nil:
		return "-"
	case rb.Share == 0:
		return "off (retry_budget 0)"
	}
	s := fmt.Sprintf("%d/%d open in %s", rb.OpenRetries, rb.Allowed, time.Duration(rb.WindowS*float64(time.Second)))
	if rb.Spent {
		s += ", spent"
	}
	return s
}

// keysNotes says, in words, why a key's jobs are not fetched (exhausted,
// throttled) and whether its retries wait on the retry budget.
func keysNotes(v keyView) []string {
	var out []string
	if v.State != keys.StateClosed {
		s := "key " + v.Key + ": exhausted"
		if v.Reason != nil {
			s += " (" + *v.Reason + ")"
		}
		if v.OpenedAt != nil {
			s += " since " + keysTime(v.OpenedAt)
		}
		switch {
		case v.State == keys.StateHalfOpen:
			s += "; a probe is out"
		case v.NextProbe != nil:
			s += "; next probe at " + keysTime(v.NextProbe)
		}
		out = append(out, s+"; its jobs stay queued")
	} else if v.Paused {
		out = append(out, fmt.Sprintf("key %s: paused (%s) until %s; its jobs wait", v.Key, *v.PauseReason, keysTime(v.PausedUntil)))
	}
	if p := v.Pacing; p != nil {
		out = append(out, keysPacing(v.Key, p))
	}
	if rb := v.RetryBudget; rb != nil && rb.Share > 0 && rb.Spent {
		out = append(out, fmt.Sprintf("key %s: retry budget spent: %d open retries, %d allowed (max of %d and %g × %d first calls in %s); retries wait until some succeed",
			v.Key, rb.OpenRetries, rb.Allowed, rb.Floor, rb.Share, rb.FirstCalls, time.Duration(rb.WindowS*float64(time.Second))))
	}
	return out
}

// keysPacing says how a key is paced: the fleet's rate, where it was
// learned, the share of each live process and what the headers said last.
func keysPacing(key string, p *pacingView) string {
	procs := "1 process"
	if p.LiveProcesses != 1 {
		procs = fmt.Sprintf("%d processes", p.LiveProcesses)
	}
	var s string
	switch {
	case p.RatePerS != nil:
		s = fmt.Sprintf("key %s: pacing at %.2f/s (from %s), %s at %.2f/s each", key, *p.RatePerS, p.Source, procs, *p.SharePerProcessPerS)
	case p.TokensPerS != nil:
		s = fmt.Sprintf("key %s: pacing by tokens (from %s), %s", key, p.Source, procs)
	default:
		s = fmt.Sprintf("key %s: not paced (%s), %s", key, p.Source, procs)
	}
	if p.TokensPerS != nil {
		s += fmt.Sprintf("; %.0f input tokens/s", *p.TokensPerS)
	}
	var hdr []string
	if p.LimitRequests != nil {
		h := fmt.Sprintf("limit %d requests", *p.LimitRequests)
		if p.RemainingRequests != nil {
			h += fmt.Sprintf(", %d remaining", *p.RemainingRequests)
		}
		hdr = append(hdr, h)
	}
	if p.LimitTokens != nil {
		h := fmt.Sprintf("limit %d tokens", *p.LimitTokens)
		if p.RemainingTokens != nil {
			h += fmt.Sprintf(", %d remaining", *p.RemainingTokens)
		}
		hdr = append(hdr, h)
	}
	if len(hdr) > 0 {
		s += "; headers: " + strings.Join(hdr, "; ")
	}
	if p.Throttles > 0 {
		s += fmt.Sprintf("; %d throttles lowered it", p.Throttles)
	}
	return s
}

// keysTime formats an optional time for a table cell.
func keysTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

func runKeysResume(ctx context.Context, e *env, args []string) int {
	const cmd = "keys resume"
	fs := flag.NewFlagSet("triage keys resume", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprintln(e.stderr, "usage: triage keys resume KEY") }
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		return failCmd(e, cmd, usageError{errors.New("want exactly one KEY (see `triage keys`)")})
	}
	key := pos[0]
	cfg, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer d.Close()

	store := keys.NewStore(d.pool, keys.StoreConfig{})
	known := cfg != nil && slices.ContainsFunc(cfg.Keys, func(k config.Key) bool { return k.Name == key })
	if !known {
		states, err := store.ListKeyStatus(ctx)
		if err != nil {
			return failCmd(e, cmd, err)
		}
		known = slices.ContainsFunc(states, func(st keys.KeyStatus) bool { return st.Key == key })
	}
	if !known {
		return failCmd(e, cmd, usageError{fmt.Errorf("unknown key %q: not in the configuration and no state in the database (see `triage keys`)", key)})
	}
	before, err := store.KeyStatus(ctx, key)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	if err := store.Reset(ctx, key); err != nil {
		return failCmd(e, cmd, err)
	}
	// Jobs parked while the key was held run now, not when their snooze ends.
	if _, err := worker.WakeKey(ctx, d.pool, "", key); err != nil {
		return failCmd(e, cmd, err)
	}

	if before.State == keys.StateClosed && before.Pause == nil {
		// Nothing was held: no alert for a no-op, so a human acting on a
		// false alarm does not raise another.
		fmt.Fprintf(e.stdout, "key %s was not held (breaker closed, no pause): nothing to resume\n", key)
		return exitOK
	}
	webhook := ""
	if cfg != nil {
		webhook = cfg.Alerts.WebhookURL
	}
	alerter := keys.NewAlerter(keys.AlerterConfig{Logger: newLogger(e.stderr, slog.LevelInfo), WebhookURL: webhook, Pool: d.pool})
	fields := map[string]any{"by": "hand", "breaker_was": string(before.State)}
	if before.Pause != nil {
		fields["pause_was"] = before.Pause.Reason
	}
	alerter.Alert(ctx, keys.Alert{Kind: keys.AlertKeyResumed, Key: key, Message: "resumed by hand", Fields: fields})
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keys.AlertWebhookTimeoutDefault+time.Second)
	defer cancel()
	_ = alerter.Close(closeCtx) // sends the webhook POST; a failure is logged by the Alerter

	was := string(before.State)
	if before.Pause != nil {
		was += ", paused (" + before.Pause.Reason + ")"
	}
	fmt.Fprintf(e.stdout, "key %s resumed: breaker closed, no pause (was %s); workers resume queue %s within a supervisor tick\n",
		key, was, keys.QueueName(key))
	return exitOK
}
