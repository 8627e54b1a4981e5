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
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
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
		if k != nil {
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
	return views, nil
}

func writeKeys(w io.Writer, views []keyView) {
	if len(views) == 0 {
		fmt.Fprintln(w, "no keys configured and none with state in the database")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVENDOR\tBREAKER\tREASON\tOPENED\tNEXT PROBE\tPAUSE\tCONCURRENCY\tSPEND\tPREPAID")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t$%.4f\t%s\n", v.Key, vendor, v.State, reason,
			keysTime(v.OpenedAt), keysTime(v.NextProbe), pause, conc, v.SpendUSD, prepaid)
	}
	tw.Flush()
	for _, v := range views {
		if v.State != keys.StateClosed || v.Paused {
			fmt.Fprintln(w, "\nafter a top-up or a fix, `triage keys resume KEY` closes the breaker and ends the pause at once (workers resume the queue within a tick)")
			break
		}
	}
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
