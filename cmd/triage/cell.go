package main

import "github.com/triage-dev/triage/ledger/redact"

// cellMaxRunes bounds a value in a table column: one long batch name or
// vendor code must not push every other column off the screen.
const cellMaxRunes = 48

// cell is a value from outside (a batch or record id, a code, a reason) as
// a table shows it: control characters escaped, at most cellMaxRunes runes
// (cut with "…"; `--json` and `dlq show` have the whole value).
func cell(s string) string {
	s = redact.Escape(s, false)
	r := []rune(s)
	if len(r) <= cellMaxRunes {
		return s
	}
	return string(r[:cellMaxRunes-1]) + "…"
}

// safe is a value from outside on a line of human output, whole but with
// its control characters escaped, so it cannot drive the terminal.
func safe(s string) string { return redact.Escape(s, false) }
