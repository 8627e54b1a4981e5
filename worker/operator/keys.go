package operator

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/jobs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/stormwatch"
)

// KeyView is one element of `triage keys --json` (a contract: add fields,
// never rename or remove them). Times are RFC 3339; null means "none".
type KeyView struct {
	Key        string  `json:"key"`
	Configured bool    `json:"configured"` // in triage.toml; false: only state in the database
	Vendor     *string `json:"vendor"`
	Queue      string  `json:"queue"` // the key's River queue
	// State is the exhausted breaker: closed, open or half_open.
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
	RetryBudget *RetryBudgetView `json:"retry_budget"`
	// Storm is the storm breaker; State, Reason, OpenedAt and NextProbe
	// above are the exhausted breaker's.
	Storm StormView `json:"storm"`
	// Pacing is the key's pace as its live worker processes report it
	// (heartbeat rows); null when no worker process is working the key.
	Pacing *PacingView `json:"pacing"`
	// SafetyNet is the safety net: its hold, if it holds the key (the
	// exhausted breaker above is then open with the hold as its reason),
	// and the key's thresholds.
	SafetyNet SafetyNetView `json:"safety_net"`
}

// SafetyNetView is the safety net of a key in `triage keys --json`.
type SafetyNetView struct {
	// Hold is "rejection_streak" or "throttle_wall" while the safety net
	// holds the key, null otherwise.
	Hold *string `json:"hold"`
	// Fingerprint is the failure the hold is about (status, vendor type and
	// code, normalised message), null when not held.
	Fingerprint *string `json:"fingerprint"`
	// Settings are the key's thresholds (null for a key not in the
	// configuration).
	Settings *SafetyNetSettingsView `json:"settings"`
}

// SafetyNetSettingsView is a key's safety-net thresholds: this many
// different records rejected in a row with one fingerprint, or only
// throttled answers for this long, hold the key. 0: that breaker is off.
type SafetyNetSettingsView struct {
	SuspectRejections  int     `json:"suspect_rejections"`
	ThrottleHoldAfterS float64 `json:"throttle_hold_after_s"`
}

func newSafetyNetView(st keys.KeyStatus, k *config.Key) SafetyNetView {
	var v SafetyNetView
	if h := st.Hold; h != nil && st.State != keys.StateClosed {
		v.Hold, v.Fingerprint = &h.Kind, &h.Fingerprint
	}
	if k != nil {
		s := worker.WatchSettings(k)
		v.Settings = &SafetyNetSettingsView{SuspectRejections: max(s.Rejections, 0), ThrottleHoldAfterS: max(s.ThrottleAfter, 0).Seconds()}
	}
	return v
}

// PacingView is how a key is paced, fleet-wide (keys.PacingStatus).
type PacingView struct {
	// LiveProcesses is the worker processes with a live heartbeat.
	LiveProcesses int `json:"live_processes"`
	// Source: "headers" (the provider's rate-limit headers), "configured"
	// (the key's rpm/tpm settings, no headers seen yet), "throttles"
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

func newPacingView(ps keys.PacingStatus) *PacingView {
	v := &PacingView{LiveProcesses: ps.Live, Source: string(ps.Source), Throttles: ps.Throttles,
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

// StormView is the storm breaker of a key in `triage keys --json`.
type StormView struct {
	// State: closed, open or half_open.
	State     keys.State `json:"state"`
	Reason    *string    `json:"reason"`
	OpenedAt  *time.Time `json:"opened_at"`
	NextProbe *time.Time `json:"next_probe"`
	// CooldownS is the wait before the next probe (open), null when closed.
	CooldownS *float64 `json:"cooldown_s"`
	// Settings are the key's thresholds (null for a key not in the
	// configuration): failures in a row, or a failure share over a window
	// once it holds min_calls, trip it; probes wait probe_min_s doubling to
	// probe_max_s; an alert fires when open for alert_after_s.
	Settings *StormSettingsView `json:"settings"`
}

// StormSettingsView is a key's storm thresholds.
type StormSettingsView struct {
	Failures    int     `json:"failures"` // 0: off
	Share       float64 `json:"share"`    // 0: off
	MinCalls    int     `json:"min_calls"`
	WindowS     float64 `json:"window_s"`
	ProbeMinS   float64 `json:"probe_min_s"`
	ProbeMaxS   float64 `json:"probe_max_s"`
	AlertAfterS float64 `json:"alert_after_s"`
}

func newStormView(st keys.StormStatus, k *config.Key) StormView {
	v := StormView{State: st.State, OpenedAt: st.OpenedAt}
	if v.State == "" {
		v.State = keys.StateClosed
	}
	if st.Reason != "" {
		v.Reason = &st.Reason
	}
	if st.State == keys.StateOpen {
		v.NextProbe = st.NextProbe
	}
	if st.State != keys.StateClosed && st.State != "" {
		c := st.CooldownS
		v.CooldownS = &c
	}
	if k != nil {
		s := worker.StormSettings(k)
		after := stormwatch.AlertAfter(k)
		v.Settings = &StormSettingsView{
			Failures: max(s.Failures, 0), Share: max(s.Share, 0), MinCalls: s.MinCalls, WindowS: s.Window.Seconds(),
			ProbeMinS: s.ProbeMin.Seconds(), ProbeMaxS: s.ProbeMax.Seconds(), AlertAfterS: after.Seconds(),
		}
	}
	return v
}

// Held reports whether the key's jobs are not fetched: its breaker is not
// closed or it is paused. Resume has something to do only then.
func (v KeyView) Held() bool {
	return v.State != keys.StateClosed || v.Storm.State != keys.StateClosed || v.Paused
}

// BreakerView is one of a key's breakers as a page shows it.
type BreakerView struct {
	// Name says which breaker: "exhausted" (needs a top-up or a fix) or
	// "storm" (heals itself through probes).
	Name      string
	State     keys.State
	Reason    *string
	OpenedAt  *time.Time
	NextProbe *time.Time
}

// Breakers lists the key's breakers for display, one row each. A breaker
// added to the key (its fields on KeyView) gets its row here, and the pages
// show it without further change.
func (v KeyView) Breakers() []BreakerView {
	return []BreakerView{
		{Name: "exhausted", State: v.State, Reason: v.Reason, OpenedAt: v.OpenedAt, NextProbe: v.NextProbe},
		{Name: "storm", State: v.Storm.State, Reason: v.Storm.Reason, OpenedAt: v.Storm.OpenedAt, NextProbe: v.Storm.NextProbe},
	}
}

// RetryBudgetView is the fleet-wide retry budget of a key over the sliding
// window, by the worker's own rule (decide.RetryBudget): a retry may go
// while OpenRetries < Allowed.
type RetryBudgetView struct {
	// Share is the key's retry_budget: retries at most this share of first
	// calls. 0: transient failures are not retried at all.
	Share float64 `json:"share"`
	// WindowS is the sliding window in seconds (decide.RetryBudget.Window).
	WindowS float64 `json:"window_s"`
	// Floor is the retries allowed however few first calls there were
	// (decide.RetryBudget.Floor).
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

// Window is WindowS as a duration.
func (rb *RetryBudgetView) Window() time.Duration {
	return time.Duration(rb.WindowS * float64(time.Second))
}

// NewRetryBudgetView applies the worker's rule, rb, to a key's usage over
// rb's window.
func NewRetryBudgetView(rb decide.RetryBudget, share float64, u ledger.RetryUsage) *RetryBudgetView {
	return &RetryBudgetView{Share: share, WindowS: rb.Window.Seconds(), Floor: rb.Floor,
		FirstCalls: u.FirstCalls, OpenRetries: u.OpenRetries,
		Allowed: rb.Allowed(share, u.FirstCalls), Spent: rb.Spent(share, u.FirstCalls, u.OpenRetries)}
}

// KeyViews lists the configured keys in file order, then any other key with
// breaker or pause state in the database, by name. cfg may be nil (no
// configuration: only the keys the database knows). rb is the retry budget
// the fleet's workers run with (worker.Options.RetryBudget), shown with
// each configured key.
func KeyViews(ctx context.Context, pool *pgxpool.Pool, cfg *config.Config, rb decide.RetryBudget) ([]KeyView, error) {
	store := keys.DefaultStore(pool)
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
	views := []KeyView{} // [] when empty, never null
	seen := map[string]bool{}
	add := func(name string, k *config.Key) error {
		seen[name] = true
		st, ok := byKey[name]
		if !ok {
			st = keys.KeyStatus{Key: name, State: keys.StateClosed}
		}
		v := KeyView{Key: name, Queue: keys.QueueName(name), State: st.State, OpenedAt: st.OpenedAt}
		if st.State == keys.StateOpen {
			v.NextProbe = st.NextProbe
		}
		if st.Reason != "" {
			v.Reason = &st.Reason
		}
		if p := st.Pause; p != nil {
			v.Paused, v.PauseReason, v.PausedUntil = true, &p.Reason, &p.Until
		}
		v.Storm = newStormView(st.Storm, k)
		v.SafetyNet = newSafetyNetView(st, k)
		spend, err := ledger.SpendByKey(ctx, pool, name, time.Time{})
		if err != nil {
			return err
		}
		v.SpendUSD = spend
		if ps, ok := paceByKey[name]; ok {
			v.Pacing = newPacingView(ps)
		}
		if k != nil {
			u, err := ledger.RetryUsageByKey(ctx, pool, name, rb.Since(now))
			if err != nil {
				return err
			}
			v.RetryBudget = NewRetryBudgetView(rb, k.RetryBudget, u)
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

// ResumeResult is what Resume did.
type ResumeResult struct {
	// Before is the key's breaker and pause before the resume.
	Before *keys.KeyStatus
	// WasHeld: the breaker was not closed or a pause was active. When false
	// nothing changed and no alert was raised.
	WasHeld bool
	// Woken counts the parked jobs made available at once.
	Woken int
}

// Was says in words what the key was before: "open, paused (throttled)".
func (r ResumeResult) Was() string {
	s := string(r.Before.State)
	if r.Before.Pause != nil {
		s += ", paused (" + r.Before.Pause.Reason + ")"
	}
	return s
}

// ResumeOptions tune Resume.
type ResumeOptions struct {
	// Alerter raises the key_resumed alert. Required.
	Alerter *keys.Alerter
	// By says who resumed, for the alert ("hand", "web"). Default "hand".
	By string
}

// Resume is `triage keys resume KEY`: it closes the key's breaker, ends its
// pause, wakes the jobs parked while it was held and raises a key_resumed
// alert. A key neither in cfg nor in the database is an InputError; a key
// that was not held is left alone, without an alert, so a human acting on a
// false alarm does not raise another.
func Resume(ctx context.Context, pool *pgxpool.Pool, cfg *config.Config, key string, opts ResumeOptions) (ResumeResult, error) {
	store := keys.DefaultStore(pool)
	known := cfg != nil && slices.ContainsFunc(cfg.Keys, func(k config.Key) bool { return k.Name == key })
	if !known {
		states, err := store.ListKeyStatus(ctx)
		if err != nil {
			return ResumeResult{}, err
		}
		known = slices.ContainsFunc(states, func(st keys.KeyStatus) bool { return st.Key == key })
	}
	if !known {
		return ResumeResult{}, inputErrorf("unknown key %q: not in the configuration and no state in the database (see `triage keys`)", key)
	}
	before, err := store.KeyStatus(ctx, key)
	if err != nil {
		return ResumeResult{}, err
	}
	if err := store.Reset(ctx, key); err != nil {
		return ResumeResult{}, err
	}
	// Jobs parked while the key was held run now, not when their snooze ends.
	woken, err := jobs.WakeKey(ctx, pool, "", key) // the CLI and the pages use the connection's search_path
	if err != nil {
		return ResumeResult{}, err
	}
	res := ResumeResult{Before: before, WasHeld: before.State != keys.StateClosed || (before.Storm.State != "" && before.Storm.State != keys.StateClosed) || before.Pause != nil, Woken: woken}
	if !res.WasHeld {
		return res, nil
	}
	fields := map[string]any{"by": cmpOr(opts.By, "hand"), "breaker_was": string(before.State)}
	if before.Pause != nil {
		fields["pause_was"] = before.Pause.Reason
	}
	if opts.Alerter != nil {
		opts.Alerter.Alert(ctx, keys.Alert{Kind: keys.AlertKeyResumed, Key: key, Message: "resumed by " + cmpOr(opts.By, "hand"), Fields: fields, ByHand: true})
	}
	return res, nil
}

// DescribeKey says why a key's breaker is not closed and what comes next:
// "key main exhausted since 02:13, next probe in 41s".
func DescribeKey(ks *keys.KeyStatus) string {
	s := "key " + ks.Key + " exhausted"
	if keys.InvalidKey(ks.Reason) {
		s = "key " + ks.Key + " refused as invalid (" + ks.Reason + ": the key is wrong or revoked, a top-up will not help)"
	}
	if ks.OpenedAt != nil {
		s += " since " + ks.OpenedAt.Local().Format("15:04")
	}
	switch {
	case ks.State == keys.StateHalfOpen:
		s += ", probing"
	case ks.NextProbe != nil && ks.NextProbe.After(ks.Now):
		s += ", next probe in " + RoundWait(ks.NextProbe.Sub(ks.Now))
	case ks.NextProbe != nil:
		s += ", probe due"
	}
	return s
}

// DescribeStorm says why a key's storm breaker is not closed and what comes
// next: "key main in a storm of provider failures since 02:13, next probe in
// 12s". "" when it is closed: a storm is a wait, not a pause a user must act
// on, but at 2 a.m. a batch that does not move must say why.
func DescribeStorm(ks *keys.KeyStatus) string {
	st := ks.Storm
	if st.State == "" || st.State == keys.StateClosed {
		return ""
	}
	s := "key " + ks.Key + " in a storm of provider failures"
	if st.OpenedAt != nil {
		s += " since " + st.OpenedAt.Local().Format("15:04")
	}
	switch {
	case st.State == keys.StateHalfOpen:
		s += ", probing"
	case st.NextProbe != nil && st.NextProbe.After(ks.Now):
		s += ", next probe in " + RoundWait(st.NextProbe.Sub(ks.Now))
	case st.NextProbe != nil:
		s += ", probe due"
	}
	return s
}

// RoundWait rounds a wait for display: tenths under ten seconds, else seconds.
func RoundWait(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
