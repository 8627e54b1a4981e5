package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/tidwall/sjson"

	"github.com/triage-dev/triage/ledger"
)

func init() {
	register(command{
		name:    "export",
		summary: "print a batch's records with their \"enrichment\" as JSONL (B)",
		run:     runExport,
	})
}

func runExport(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage export", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	partial := fs.Bool("partial", false, "export a batch that has not settled yet (records still pending are skipped)")
	setUsage(fs, e,
		"usage: triage export [--partial] B > enriched.jsonl",
		"Prints each record of batch B that has a result, in input order, with an added",
		"\"enrichment\" field: the JSON object (or text) the model returned. Records without a",
		"result (dead-lettered or pending) are skipped and counted on stderr. A record answered",
		"from a truncated request (on_overflow = \"truncate\") also gets \"triage\":{\"truncated\":true}.",
		"A batch that has not settled is refused with exit 4 and nothing written, unless --partial",
		"(`triage wait B` first waits for it to settle).",
	)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	switch {
	case len(pos) == 0:
		fmt.Fprintln(e.stderr, "triage export: name the batch (`triage status` lists them)")
		return exitUsage
	case len(pos) > 1:
		fmt.Fprintf(e.stderr, "triage export: unexpected argument %q (one batch at a time)\n", pos[1])
		return exitUsage
	}
	id := pos[0]
	_, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, "export", err)
	}
	defer d.Close()
	st, err := ledger.BatchStatus(ctx, d.pool, id)
	if err != nil {
		if errors.Is(err, ledger.ErrNotFound) {
			fmt.Fprintf(e.stderr, "triage export: no batch %q (`triage status` lists them)\n", id)
			return exitUsage
		}
		fmt.Fprintf(e.stderr, "triage export: %v\n", err)
		return exitRuntime
	}
	if st.State != ledger.BatchSettled && !*partial {
		// A nightly `work && export && notify` must not report success
		// with half a file.
		fmt.Fprintf(e.stderr, "triage export: batch %s has not settled: %d of %d records pending (state %s); nothing exported. "+
			"`triage wait %s` waits for it; --partial exports what is done\n", id, st.Pending, st.Total, st.State, id)
		return exitQueued
	}
	w := bufio.NewWriter(e.stdout)
	exported, skipped := 0, 0
	for row, err := range ledger.Results(ctx, d.pool, id) {
		if err != nil {
			w.Flush()
			fmt.Fprintf(e.stderr, "triage export: %v\n", err)
			return exitRuntime
		}
		if row.Output == nil {
			skipped++
			continue
		}
		line, err := enrich(row.Data, row.Output, ledger.Truncated(row.Change))
		if err == nil && row.Partial {
			line, err = markPartial(line)
		}
		if err == nil && row.Model != "" {
			line, err = markModel(line, row.Model)
		}
		if err != nil {
			w.Flush()
			fmt.Fprintf(e.stderr, "triage export: record %s: %v\n", row.ID, err)
			return exitRuntime
		}
		w.Write(line)
		w.WriteByte('\n')
		exported++
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(e.stderr, "triage export: write: %v\n", err)
		return exitRuntime
	}
	fmt.Fprintf(e.stderr, "exported %d records", exported)
	if skipped > 0 {
		fmt.Fprintf(e.stderr, "; skipped %d without a result (dead-lettered or pending: `triage dlq list --batch %s`)", skipped, id)
	}
	fmt.Fprintln(e.stderr)
	return exitOK
}

// markPartial sets "triage":{"partial":true} on an exported line: its
// enrichment is a cut stream's partial text. The "triage" object is where
// export marks how a result came to be (a truncated record sets "truncated").
func markPartial(line []byte) ([]byte, error) {
	return sjson.SetBytes(line, "triage.partial", true)
}

// markModel sets "triage":{"model":...} on an exported line: which model
// answered, the pipeline's own or a fallback it moved to.
func markModel(line []byte, model string) ([]byte, error) {
	return sjson.SetBytes(line, "triage.model", model)
}

// enrich returns record, on one line, with "enrichment" set to output (a
// JSON object, or a JSON string for text pipelines). An "enrichment" field
// the record already had is replaced. A record whose answer came from a
// truncated request also gets "triage":{"truncated":true}, so that nobody
// takes it for an answer to the whole record.
func enrich(record, output json.RawMessage, truncated bool) ([]byte, error) {
	b, err := sjson.SetRawBytes(bytes.Clone(record), "enrichment", output)
	if err != nil {
		return nil, err
	}
	if truncated {
		if b, err = sjson.SetRawBytes(b, "triage", []byte(`{"truncated":true}`)); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
