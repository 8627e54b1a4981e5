package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/operator"
)

func init() {
	register(command{
		name:    "keys",
		summary: "show each key's breaker, pause, concurrency and spend; `keys resume KEY` resumes one by hand",
		run:     runKeys,
	})
}

func runKeys(ctx context.Context, e *env, args []string) int {
	if len(args) > 0 && args[0] == "resume" {
		return runKeysResume(ctx, e, args[1:])
	}
	const cmd = "keys"
	fs := flag.NewFlagSet("triage keys", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	asJSON := fs.Bool("json", false, "print a JSON array")
	setUsage(fs, e, "usage: triage keys [--json]\n       triage keys resume KEY")
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
	views, err := operator.KeyViews(ctx, d.pool, cfg, fleetRetryBudget())
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

func writeKeys(w io.Writer, views []operator.KeyView) {
	if len(views) == 0 {
		fmt.Fprintln(w, "no keys configured and none with state in the database")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVENDOR\tBREAKER\tSTORM\tREASON\tOPENED\tNEXT PROBE\tPAUSE\tCONCURRENCY\tSPEND\tPREPAID\tRETRIES\tSAFETY NET")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t$%.4f\t%s\t%s\t%s\n", v.Key, vendor, v.State, v.Storm.State, cell(reason),
			keysTime(v.OpenedAt), keysTime(v.NextProbe), pause, conc, v.SpendUSD, prepaid, keysRetries(v.RetryBudget), keysSafetyNet(v.SafetyNet))
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

// keysSafetyNet is the SAFETY NET cell: the hold, or the thresholds.
func keysSafetyNet(sn operator.SafetyNetView) string {
	switch {
	case sn.Hold != nil:
		return "held: " + *sn.Hold
	case sn.Settings == nil:
		return "-"
	}
	var parts []string
	if n := sn.Settings.SuspectRejections; n > 0 {
		parts = append(parts, strconv.Itoa(n)+" rejections")
	}
	if s := sn.Settings.ThrottleHoldAfterS; s > 0 {
		parts = append(parts, "throttled "+time.Duration(s*float64(time.Second)).String())
	}
	if len(parts) == 0 {
		return "off"
	}
	return strings.Join(parts, ", ")
}

// keysRetries is the RETRIES cell: open retries of those allowed over the
// window.
func keysRetries(rb *operator.RetryBudgetView) string {
	switch {
	case rb == nil:
		return "-"
	case rb.Share == 0:
		return "off (retry_budget 0)"
	}
	s := fmt.Sprintf("%d/%d open in %s", rb.OpenRetries, rb.Allowed, rb.Window())
	if rb.Spent {
		s += ", spent"
	}
	return s
}

// breakerSince says since when a breaker in state is open and where its
// probe is: " since T; a probe is out" or "; next probe at T".
func breakerSince(state keys.State, opened, next *time.Time) string {
	s := ""
	if opened != nil {
		s += " since " + keysTime(opened)
	}
	switch {
	case state == keys.StateHalfOpen:
		s += "; a probe is out"
	case next != nil:
		s += "; next probe at " + keysTime(next)
	}
	return s
}

// keysNotes says, in words, why a key's jobs are not fetched (exhausted,
// throttled) and whether its retries wait on the retry budget.
func keysNotes(v operator.KeyView) []string {
	var out []string
	if v.State != keys.StateClosed && v.SafetyNet.Hold != nil {
		s := fmt.Sprintf("key %s: held by the safety net (%s) for the error %q", v.Key, *v.SafetyNet.Hold, *v.SafetyNet.Fingerprint)
		s += breakerSince(v.State, v.OpenedAt, v.NextProbe)
		out = append(out, s+"; a suspected account problem the classifier did not know: its jobs stay queued and the dead letters of that error go back with them")
	} else if v.State != keys.StateClosed {
		s := "key " + v.Key + ": exhausted"
		if v.Reason != nil && keys.InvalidKey(*v.Reason) {
			s = "key " + v.Key + ": refused as invalid (" + *v.Reason + ": the API key is wrong or revoked, a top-up will not help)"
		} else if v.Reason != nil {
			s += " (" + *v.Reason + ")"
		}
		s += breakerSince(v.State, v.OpenedAt, v.NextProbe)
		out = append(out, s+"; its jobs stay queued")
	} else if v.Storm.State != keys.StateClosed {
		s := "key " + v.Key + ": provider storm (storm breaker " + string(v.Storm.State) + ")"
		s += breakerSince(v.Storm.State, v.Storm.OpenedAt, v.Storm.NextProbe)
		if v.Storm.CooldownS != nil {
			s += fmt.Sprintf(", cooldown %s", time.Duration(*v.Storm.CooldownS*float64(time.Second)))
		}
		out = append(out, s+"; its jobs stay queued and spend no attempts; it heals by itself")
	} else if v.Paused {
		out = append(out, fmt.Sprintf("key %s: paused (%s) until %s; its jobs wait", v.Key, *v.PauseReason, keysTime(v.PausedUntil)))
	}
	if p := v.Pacing; p != nil {
		out = append(out, keysPacing(v.Key, p))
	}
	if rb := v.RetryBudget; rb != nil && rb.Share > 0 && rb.Spent {
		out = append(out, fmt.Sprintf("key %s: retry budget spent: %d open retries, %d allowed (max of %d and %g × %d first calls in %s); retries wait until some succeed",
			v.Key, rb.OpenRetries, rb.Allowed, rb.Floor, rb.Share, rb.FirstCalls, rb.Window()))
	}
	return out
}

// paceSourceWords says where a pace comes from, as a phrase (the JSON keeps
// the bare source).
func paceSourceWords(source string) string {
	switch keys.PaceSource(source) {
	case keys.PaceHeaders:
		return "from the rate-limit headers"
	case keys.PaceConfigured:
		return "from the configured rpm/tpm"
	case keys.PaceThrottles:
		return "learned from throttles"
	case keys.PaceStarting:
		return "starting: no limit learned yet"
	}
	return "from " + source
}

// keysPacing says how a key is paced: the fleet's rate, where it was
// learned, the share of each live process and what the headers said last.
func keysPacing(key string, p *operator.PacingView) string {
	procs := "1 process"
	if p.LiveProcesses != 1 {
		procs = fmt.Sprintf("%d processes", p.LiveProcesses)
	}
	var s string
	switch {
	case p.RatePerS != nil:
		s = fmt.Sprintf("key %s: pacing at %.2f/s (%s), %s at %.2f/s each", key, *p.RatePerS, paceSourceWords(p.Source), procs, *p.SharePerProcessPerS)
	case p.TokensPerS != nil:
		s = fmt.Sprintf("key %s: pacing by tokens (%s), %s", key, paceSourceWords(p.Source), procs)
	default:
		s = fmt.Sprintf("key %s: not paced (%s), %s", key, paceSourceWords(p.Source), procs)
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

	alerter, closeAlerter, err := handAlerter(ctx, e, cfg, d)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	res, err := operator.Resume(ctx, d.pool, cfg, key, operator.ResumeOptions{Alerter: alerter, By: "hand"})
	closeAlerter() // sends the webhook POST; a failure is logged by the Alerter
	if err != nil {
		return failCmd(e, cmd, err)
	}
	if !res.WasHeld {
		fmt.Fprintf(e.stdout, "key %s was not held (breaker closed, no pause): nothing to resume\n", key)
		return exitOK
	}
	was := res.Was()
	fmt.Fprintf(e.stdout, "key %s resumed: breaker closed, no pause (was %s); workers resume queue %s within a supervisor tick\n",
		key, was, keys.QueueName(key))
	return exitOK
}
