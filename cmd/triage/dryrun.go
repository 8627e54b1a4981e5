package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/keys"
)

// dryRun is what `--dry-run` prints: the input's estimate, the expected
// answer length from the pipeline's past answers, and the key's last known
// pace.
type dryRun struct {
	est enqueue.Estimate
	// pastAnswers and outputMean: the pipeline's latest answered calls on
	// its model (ledger.OutputHistory); 0 calls: no history.
	pastAnswers int
	outputMean  float64
	// pace: the key's last pace (ok), else its configured rpm/tpm.
	pace     keys.LastPace
	paceKnow bool
	// noDB says why there is no history or pace ("" when the database was read).
	noDB string
	// budgetUSD is the batch's spend cap (0: none).
	budgetUSD float64
}

// runDryRun is `enqueue --dry-run` and `run --dry-run`: the input is read
// and checked with enqueue's rules, and estimated; nothing is written (the
// database, when there is one, is only read) and nothing is sent.
func runDryRun(ctx context.Context, e *env, cmd string, f batchFlags, budget *float64) int {
	cfg, err := loadConfig(e)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	if _, err := cfg.Pipeline(f.pipeline); err != nil {
		return failCmd(e, cmd, usageError{err})
	}
	r, name, closeInput, err := openInput(e, f.file)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer closeInput()
	est, err := enqueue.EstimateJSONL(cfg, f.pipeline, r, name)
	var lineErr *enqueue.LineError
	if errors.As(err, &lineErr) || errors.Is(err, enqueue.ErrNoRecords) {
		return failCmd(e, cmd, usageError{err})
	}
	if err != nil {
		return failCmd(e, cmd, err)
	}
	dr := dryRun{est: est, budgetUSD: est.Pipeline.BudgetUSD}
	if budget != nil {
		dr.budgetUSD = *budget
	}
	// The history and the pace are read if there is a database already;
	// a dry run never creates one.
	if d, err := openExistingDB(ctx, e, cfg); err != nil {
		dr.noDB = "no database to read (" + err.Error() + ")"
	} else {
		defer d.Close()
		if dr.pastAnswers, dr.outputMean, err = ledger.OutputHistory(ctx, d.pool, est.Pipeline.Name, est.Model.Name); err != nil {
			return failCmd(e, cmd, err)
		}
		lp, ok, err := keys.DefaultStore(d.pool).LastPaceOf(ctx, est.Key.Name)
		if err != nil {
			return failCmd(e, cmd, err)
		}
		// A key still in slow start has no known pace.
		dr.pace, dr.paceKnow = lp, ok && lp.Source != keys.PaceStarting && lp.RatePerS > 0
	}
	dr.write(e.stdout)
	return exitOK
}

// expectedOutput is the expected output tokens of the sent records, their
// mean a record, and whether the pipeline's history gives them. Without
// history each answer is estimated as long as its input (the mean input a
// sent record), capped at max_tokens: a stated basis, so that a first run
// still gets an expected figure.
func (dr dryRun) expectedOutput() (total int64, perRecord float64, fromHistory bool) {
	sent := dr.est.Sent()
	if dr.pastAnswers > 0 {
		return int64(math.Round(dr.outputMean * float64(sent))), dr.outputMean, true
	}
	if sent == 0 {
		return 0, 0, false
	}
	perRecord = min(float64(dr.est.InputTokens)/float64(sent), float64(dr.est.Pipeline.MaxTokens))
	return int64(math.Round(perRecord * float64(sent))), perRecord, false
}

// duration is how long the sent records take at rate requests and tok
// tokens per second (0: not limited); ok false when neither limits.
func duration(requests, tokens int64, rate, tok float64) (time.Duration, bool) {
	var s float64
	if rate > 0 {
		s = float64(requests) / rate
	}
	if tok > 0 {
		s = max(s, float64(tokens)/tok)
	}
	if s == 0 {
		return 0, false
	}
	return time.Duration(s * float64(time.Second)).Round(time.Second), true
}

func (dr dryRun) write(w io.Writer) {
	est, m := dr.est, dr.est.Model
	fmt.Fprintln(w, "dry run: nothing queued, nothing sent")
	fmt.Fprintf(w, "pipeline %s, model %s, key %s\n", est.Pipeline.Name, m.Name, est.Key.Name)
	fmt.Fprintf(w, "records: %d", est.Records)
	if est.OverContext > 0 {
		fmt.Fprintf(w, " (%d over the model's context_tokens %d: the provider refuses them unbilled; not counted below)", est.OverContext, m.ContextTokens)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "input tokens: %d (about 4 bytes a token, as the budget counts)\n", est.InputTokens)
	outMax := est.MaxOutputTokens()
	out, perRecord, known := dr.expectedOutput()
	estimated := ""
	switch {
	case known:
		fmt.Fprintf(w, "output tokens: %d expected (%.1f a record, the mean of this pipeline's last %d answers); at most %d (max_tokens %d a record)\n",
			out, dr.outputMean, dr.pastAnswers, outMax, est.Pipeline.MaxTokens)
	default:
		why := "this pipeline has no answered call in the ledger yet"
		if dr.noDB != "" {
			why = dr.noDB
		}
		fmt.Fprintf(w, "output tokens: %d estimated (%.1f a record: as long as its input, capped at max_tokens; %s); at most %d (max_tokens %d a record)\n",
			out, perRecord, why, outMax, est.Pipeline.MaxTokens)
		estimated = "   (output estimated from the input size)"
	}
	fmt.Fprintln(w, "cost (USD, retries not included):")
	bin, bout := m.BatchPrices()
	fmt.Fprintf(w, "  expected   sync $%.6f   batch $%.6f%s\n", m.Cost(int(est.InputTokens), int(out)), m.BatchCost(int(est.InputTokens), int(out)), estimated)
	fmt.Fprintf(w, "  at most    sync $%.6f   batch $%.6f   (every answer max_tokens long: what the budget reserves)\n",
		m.Cost(int(est.InputTokens), int(outMax)), m.BatchCost(int(est.InputTokens), int(outMax)))
	if bin == 0 && bout == 0 {
		fmt.Fprintf(w, "  (model %s has no batch prices)\n", m.Name)
	}
	if dr.budgetUSD > 0 {
		switch {
		case m.Cost(int(est.InputTokens), int(out)) > dr.budgetUSD:
			fmt.Fprintf(w, "budget $%.2f: the expected cost is over it; the batch would pause at its cap\n", dr.budgetUSD)
		default:
			fmt.Fprintf(w, "budget $%.2f\n", dr.budgetUSD)
		}
	}
	tokens := est.InputTokens + out
	rate, tok, basis := 0.0, 0.0, ""
	switch {
	case dr.paceKnow:
		rate, tok = dr.pace.RatePerS, dr.pace.TokensPerS
		basis = fmt.Sprintf("the key's last pace, %.1f requests/s, learned from %s at %s", rate, dr.pace.Source, dr.pace.At.Local().Format(time.DateTime))
	case est.Key.RPM > 0 || est.Key.TPM > 0:
		rate, tok = float64(est.Key.RPM)/60, float64(est.Key.TPM)/60
		basis = "the key's configured"
		if est.Key.RPM > 0 {
			basis += fmt.Sprintf(" rpm %d", est.Key.RPM)
		}
		if est.Key.TPM > 0 {
			basis += fmt.Sprintf(" tpm %d", est.Key.TPM)
		}
	}
	if d, ok := duration(int64(est.Sent()), tokens, rate, tok); ok {
		fmt.Fprintf(w, "time: about %s at %s\n", d, basis)
	} else {
		fmt.Fprintln(w, "time: unknown (no pace learned for the key yet, and no rpm or tpm set on it)")
	}
}
