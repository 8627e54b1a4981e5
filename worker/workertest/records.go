package workertest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/triage-dev/triage/ledger"
)

// Records makes n records r001..rNNN on lines 1..n, each
// {"id":"rNNN","name":"name N"}. extra, when not nil, returns more members
// for record i (0-based), written after name with their leading comma:
// `,"note":"x"`.
func Records(n int, extra func(i int) string) []ledger.Record {
	out := make([]ledger.Record, n)
	for i := range out {
		id := fmt.Sprintf("r%03d", i+1)
		more := ""
		if extra != nil {
			more = extra(i)
		}
		data := fmt.Sprintf(`{"id":%q,"name":"name %d"%s}`, id, i+1, more)
		out[i] = ledger.Record{ID: id, Line: i + 1, Data: json.RawMessage(data)}
	}
	return out
}

// JSONL is Records(n, nil) as a JSON Lines file, one record a line.
func JSONL(n int) string {
	var b strings.Builder
	for _, r := range Records(n, nil) {
		b.Write(r.Data)
		b.WriteByte('\n')
	}
	return b.String()
}
