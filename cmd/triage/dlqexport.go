package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/triage-dev/triage/worker/operator"
)

// runDLQExport is `triage dlq export`: the dead letters dlq list would show,
// as JSONL on stdout (operator.ExportDeadLetters), streamed. The count goes
// to stderr so stdout is only the JSONL.
func runDLQExport(ctx context.Context, e *env, args []string) int {
	const cmd = "dlq export"
	fs := flag.NewFlagSet("triage "+cmd, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var f operator.DeadLetterFilter
	fs.StringVar(&f.Batch, "batch", "", "only this batch")
	fs.StringVar(&f.Class, "class", "", "only this class (transient, throttled, exhausted, rejected, ambiguous, ok)")
	fs.StringVar(&f.Reason, "reason", "", "only this reason (e.g. context_length, retries_exhausted)")
	fs.BoolVar(&f.Unknown, "unknown", false, "only dead letters whose verdict was a default (known:false): the errors no rule knew")
	setUsage(fs, e,
		"usage: triage dlq export [--batch B] [--class C] [--reason R] [--unknown] > dead.jsonl",
		"Writes the dead letters not requeued as JSONL, one object a line, oldest first;",
		"each line's \"record\" is the input record as enqueued (`jq -c .record` re-imports them).",
	)
	if code, ok := parseNoArgs(e, cmd, fs, args); !ok {
		return code
	}
	_, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer d.Close()
	n, err := operator.ExportDeadLetters(ctx, d.pool, f, e.stdout)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	noun := "dead letters"
	if n == 1 {
		noun = "dead letter"
	}
	fmt.Fprintf(e.stderr, "exported %d %s\n", n, noun)
	return exitOK
}
