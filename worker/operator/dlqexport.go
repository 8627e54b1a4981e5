package operator

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/triage-dev/triage/ledger"
)

// ExportDeadLetters writes the dead letters not requeued that match f to w
// as JSONL, oldest first, one ledger.DeadLetterExport object a line, and
// returns how many it wrote: `triage dlq export`. It streams (one row at a
// time from the database to w). An unknown batch or class is an InputError,
// reported before anything is written. A failure part-way leaves the lines
// written so far on w, each complete.
func ExportDeadLetters(ctx context.Context, db ledger.DBTX, f DeadLetterFilter, w io.Writer) (int, error) {
	if err := CheckClass(f.Class); err != nil {
		return 0, err
	}
	if f.Batch != "" {
		if err := CheckBatch(ctx, db, f.Batch); err != nil {
			return 0, err
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	n := 0
	for x, err := range ledger.ExportDeadLetters(ctx, db, ledger.DeadLetterFilter{Batch: f.Batch, Class: f.Class, Reason: f.Reason, Unknown: f.Unknown}) {
		if err != nil {
			bw.Flush()
			return n, err
		}
		if err := enc.Encode(x); err != nil {
			return n, fmt.Errorf("export dead letter %d: %w", x.ID, err)
		}
		n++
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("export dead letters: %w", err)
	}
	return n, nil
}
