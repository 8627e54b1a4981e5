package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/redact"
)

// partialsShown bounds the cut streams `triage ledger` lists.
const partialsShown = 50

// partialPreview is how much of a partial text the table shows.
const partialPreview = 60

// writePartials lists the cut streams whose partial output the ledger kept.
func writePartials(w io.Writer, ps []ledger.PartialAttempt) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintf(w, "\ncut streams (partial output kept; newest %d at most):\n", partialsShown)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  attempt\tbatch\trecord\tstatus\tchars\toutput_tokens\tpartial")
	for _, p := range ps {
		status := string(p.Status)
		if p.Accepted {
			status += " (accepted)"
		}
		text := p.Text
		if utf8.RuneCountInString(text) > partialPreview {
			text = string([]rune(text)[:partialPreview]) + "…"
		}
		text = redact.Escape(strings.ReplaceAll(text, "\n", " "), false)
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\t%d\t%s\n", p.AttemptID, safe(p.Batch), safe(p.RecordID), status,
			utf8.RuneCountInString(p.Text), p.OutputTokens, text)
	}
	tw.Flush()
}
