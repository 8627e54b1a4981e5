package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/operator"
)

func init() {
	register(command{
		name:    "batch",
		summary: "control a batch: `batch pause|resume|cancel|delete B`; `batch budget B USD` sets its spend cap and resumes it",
		run:     runBatch,
	})
}

const batchUsage = `usage: triage batch pause B        # its jobs stay queued and make no call until resumed
       triage batch resume B       # resume a paused batch
       triage batch cancel B       # cancel every record not yet completed (calls in flight finish)
       triage batch delete B       # remove a settled batch from the ledger
       triage batch budget B USD   # USD 0: no cap`

// batchCancelHelp is what `triage batch cancel` does, for --help.
const batchCancelHelp = `Cancels batch B in one transaction: no call of B starts after it. Every
record whose job is queued is dead-lettered with reason "cancelled" at once;
a call in flight finishes and is recorded, and a record it did not complete
is dead-lettered "cancelled" by its job. Batch lines not sent yet are closed
($0); provider batches holding B's lines are cancelled at the provider (the
key's batch submitter, in a running ` + "`triage work`" + ` or ` + "`triage run`" + `, sends the
cancel) and the answers they still return are collected and billed once.
The batch settles once every record has a result or a dead letter
(` + "`triage wait B`" + `). Requeue records with ` + "`triage dlq requeue --batch B --reason cancelled`" + `.
Exit 0, also when B had settled already; 2 when there is no batch B.`

func runBatch(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, batchUsage)
		return exitUsage
	}
	switch sub := args[0]; sub {
	case "budget":
		return runBatchBudget(ctx, e, args[1:])
	case "cancel":
		return runBatchCancel(ctx, e, args[1:])
	case "pause", "resume", "delete":
		return runBatchControl(ctx, e, sub, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(e.stdout, batchUsage)
		fmt.Fprintln(e.stdout)
		fmt.Fprintln(e.stdout, "batch cancel: "+batchCancelHelp)
		return exitOK
	default:
		fmt.Fprintf(e.stderr, "triage batch: unknown subcommand %q (want pause, resume, cancel, delete or budget)\n%s\n", sub, batchUsage)
		return exitUsage
	}
}

// batchArg parses a subcommand's one batch argument.
func batchArg(e *env, sub string, args []string) (string, int, bool) {
	fs := flag.NewFlagSet("triage batch "+sub, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: triage batch "+sub+" B")
		if sub == "cancel" {
			fmt.Fprintln(e.stderr, batchCancelHelp)
		}
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return "", parseFailed(err), false
	}
	if len(pos) != 1 {
		return "", failCmd(e, "batch "+sub, usageError{errors.New("want one batch: usage: triage batch " + sub + " B")}), false
	}
	return pos[0], 0, true
}

// runBatchControl runs `triage batch pause | resume | delete B`.
func runBatchControl(ctx context.Context, e *env, sub string, args []string) int {
	cmd := "batch " + sub
	id, code, ok := batchArg(e, sub, args)
	if !ok {
		return code
	}
	return batchControl(ctx, e, cmd, func(d *db, opts operator.ControlOptions) int {
		switch sub {
		case "pause":
			res, err := operator.PauseBatch(ctx, d.pool, id, opts)
			if err != nil {
				return failCmd(e, cmd, err)
			}
			if !res.Changed {
				fmt.Fprintf(e.stdout, "batch %s: paused already (`triage batch resume %s` resumes it)\n", id, id)
				return exitOK
			}
			fmt.Fprintf(e.stdout, "batch %s: paused; its jobs stay queued and make no call (calls in flight finish and are recorded); "+
				"`triage batch resume %s` resumes it\n", id, id)
		case "resume":
			res, err := operator.ResumeBatch(ctx, d.pool, id, opts)
			if err != nil {
				return failCmd(e, cmd, err)
			}
			if !res.Changed {
				fmt.Fprintf(e.stdout, "batch %s: not paused by hand (state %s), nothing to resume\n", id, res.Before)
				return exitOK
			}
			fmt.Fprintf(e.stdout, "batch %s: resumed; %d queued %s woken\n", id, res.Woken, plural(res.Woken, "job", "jobs"))
		case "delete":
			b, err := operator.DeleteBatch(ctx, d.pool, id, opts)
			if err != nil {
				return failCmd(e, cmd, err)
			}
			fmt.Fprintf(e.stdout, "batch %s: deleted (%d records with their results, dead letters, attempts and finished jobs; "+
				"the key's spend counters keep its $%.4f)\n", id, b.Total, b.SpentUSD)
		}
		return exitOK
	})
}

// parseUSD reads a non-negative, finite dollar amount ("5", "12.50", "$3").
func parseUSD(s string) (float64, error) {
	t := s
	if len(t) > 0 && t[0] == '$' {
		t = t[1:]
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, usageError{fmt.Errorf("USD %q is not a non-negative amount of dollars (e.g. 25 or 12.50)", s)}
	}
	return v, nil
}

func runBatchBudget(ctx context.Context, e *env, args []string) int {
	const cmd = "batch budget"
	fs := flag.NewFlagSet("triage batch budget", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprintln(e.stderr, batchUsage) }
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 2 {
		return failCmd(e, cmd, usageError{errors.New("want a batch and an amount: " + batchUsage)})
	}
	id := pos[0]
	usd, err := parseUSD(pos[1])
	if err != nil {
		return failCmd(e, cmd, err)
	}
	// 0 means no cap, as budget_usd = 0 does in triage.toml.
	var budget *float64
	if usd > 0 {
		budget = &usd
	}
	return batchControl(ctx, e, cmd, func(d *db, opts operator.ControlOptions) int {
		before, after, err := operator.SetBudget(ctx, d.pool, id, budget, opts)
		if err != nil {
			return failCmd(e, cmd, err)
		}

		capText := "no spend cap"
		if after.BudgetUSD != nil {
			capText = fmt.Sprintf("spend cap $%.2f", *after.BudgetUSD)
		}
		fmt.Fprintf(e.stdout, "batch %s: %s (spent $%.4f so far)\n", id, capText, after.SpentUSD)
		if before.State == ledger.BatchPausedBudget && after.State != ledger.BatchPausedBudget {
			fmt.Fprintf(e.stdout, "batch %s was paused by its budget and is running again\n", id)
		}
		if after.BudgetUSD != nil && after.SpentUSD >= *after.BudgetUSD {
			fmt.Fprintf(e.stderr, "triage batch budget: warning: batch %s has already spent $%.4f, at or over the new cap\n", id, after.SpentUSD)
		}
		return exitOK
	})
}

func runBatchCancel(ctx context.Context, e *env, args []string) int {
	const cmd = "batch cancel"
	id, code, ok := batchArg(e, "cancel", args)
	if !ok {
		return code
	}
	return batchControl(ctx, e, cmd, func(d *db, opts operator.ControlOptions) int {
		res, err := operator.CancelBatch(ctx, d.pool, id, opts)
		if err != nil {
			return failCmd(e, cmd, err)
		}
		if res.Settled {
			fmt.Fprintf(e.stdout, "batch %s: settled already (every record has a result or a dead letter), nothing to cancel\n", id)
			return exitOK
		}
		fmt.Fprintf(e.stdout, "batch %s: cancelled; %d %s dead-lettered (reason %s)", id, res.DeadLettered,
			plural(res.DeadLettered, "record", "records"), ledger.ReasonCancelled)
		if res.LinesTakenBack > 0 {
			fmt.Fprintf(e.stdout, ", %d batch %s not sent yet closed ($0)", res.LinesTakenBack, plural(res.LinesTakenBack, "line", "lines"))
		}
		fmt.Fprintln(e.stdout)
		if res.InFlight > 0 {
			fmt.Fprintf(e.stdout, "%d %s in flight: %s and %s recorded; a record left without an answer is dead-lettered %s\n",
				res.InFlight, plural(res.InFlight, "call is", "calls are"), plural(res.InFlight, "it finishes", "they finish"),
				plural(res.InFlight, "is", "are"), ledger.ReasonCancelled)
		}
		if len(res.ProviderBatches) > 0 {
			what := "1 provider batch"
			if len(res.ProviderBatches) != 1 {
				what = fmt.Sprintf("%d provider batches", len(res.ProviderBatches))
			}
			fmt.Fprintf(e.stdout, "cancel requested for %s (%s): the answers they still return are collected and billed once; "+
				"the lines they never ran are dead-lettered %s\n", what, safe(operator.CancelNames(res.ProviderBatches)), ledger.ReasonCancelled)
		}
		fmt.Fprintf(e.stdout, "`triage wait %s` returns once it has settled; `triage dlq requeue --batch %s --reason %s` brings the records back\n",
			id, id, ledger.ReasonCancelled)
		return exitOK
	})
}

// batchControl runs do, a batch control by hand, with the database and the
// control's options (controlOptions), and closes both after it; a failure
// to open either is cmd's failure.
func batchControl(ctx context.Context, e *env, cmd string, do func(d *db, opts operator.ControlOptions) int) int {
	cfg, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer d.Close()
	opts, closeAlerter, err := controlOptions(ctx, e, cfg, d)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer closeAlerter()
	return do(d, opts)
}

// controlOptions are the options of a batch control by hand: an Alerter
// that records the action and posts it to [alerts] webhook_url (when the
// configuration names one), logged at INFO on stderr. The returned func
// sends what is queued (bounded) and stops the Alerter; a failed POST is
// logged, never the command's failure.
func controlOptions(ctx context.Context, e *env, cfg *config.Config, d *db) (operator.ControlOptions, func(), error) {
	alerter, closeAlerter, err := handAlerter(ctx, e, cfg, d)
	if err != nil {
		return operator.ControlOptions{}, nil, err
	}
	return operator.ControlOptions{Alerter: alerter, By: "hand"}, closeAlerter, nil
}

// handAlerter is the Alerter of a command a person runs: it posts to the
// configuration's webhook, if any. Its close sends what is queued
// (bounded) and stops it; a failed POST is logged by the Alerter, never
// the command's failure.
func handAlerter(ctx context.Context, e *env, cfg *config.Config, d *db) (*keys.Alerter, func(), error) {
	webhook := ""
	if cfg != nil {
		webhook = cfg.Alerts.WebhookURL
	}
	alerter, err := keys.NewAlerter(keys.AlerterConfig{Logger: newLogger(e.stderr, slog.LevelInfo), WebhookURL: webhook, Pool: d.pool})
	if err != nil {
		return nil, nil, err
	}
	return alerter, func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keys.AlertWebhookTimeoutDefault+time.Second)
		defer cancel()
		_ = alerter.Close(closeCtx)
	}, nil
}
