package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/triage-dev/triage/ledger"
)

// dbSize is `triage db size`: the disk each ledger table (and River's job
// table) uses, largest first, with the total.
func dbSize(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage db size", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	asJSON := fs.Bool("json", false, `print {"tables":[{"table","rows_estimate","bytes"}],"total_bytes"}`)
	setUsage(fs, e,
		"usage: triage db size [--json]",
		"The disk the ledger uses, per table (indexes included), largest first. Rows are",
		"PostgreSQL's estimate. [retention] in triage.toml sets what `triage work` prunes.",
	)
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if fs.NArg() > 0 {
		return failCmd(e, "db size", usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))})
	}
	_, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, "db size", err)
	}
	defer d.Close()
	sizes, err := ledger.TableSizes(ctx, d.pool)
	if err != nil {
		return failCmd(e, "db size", err)
	}
	var total int64
	for _, s := range sizes {
		total += s.Bytes
	}
	if *asJSON {
		out := struct {
			Tables []ledger.TableSize `json:"tables"`
			Total  int64              `json:"total_bytes"`
		}{sizes, total}
		if out.Tables == nil {
			out.Tables = []ledger.TableSize{}
		}
		if err := json.NewEncoder(e.stdout).Encode(out); err != nil {
			return failCmd(e, "db size", err)
		}
		return exitOK
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "TABLE\tROWS (EST.)\tSIZE\t")
	for _, s := range sizes {
		rows := "-"
		if s.Rows >= 0 {
			rows = fmt.Sprint(s.Rows)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t\n", s.Table, rows, humanBytes(s.Bytes))
	}
	fmt.Fprintf(w, "total\t\t%s\t\n", humanBytes(total))
	if err := w.Flush(); err != nil {
		return failCmd(e, "db size", err)
	}
	return exitOK
}

// humanBytes is n in B, kB, MB or GB (powers of 1000), three digits.
func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, suffix := float64(n), []string{"kB", "MB", "GB", "TB"}
	i := -1
	for f >= unit && i < len(suffix)-1 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.3g %s", f, suffix[i])
}
