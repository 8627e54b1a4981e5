// Package redact is the one boundary for text that comes from outside:
// everything a provider (or a proxy in front of it) sends back — the error
// body, the vendor's code and type, the reason, the headers worth keeping —
// passes a Boundary before it can reach a log, an error, River's errors
// column, a ledger row, a dead letter, an alert or a metric label.
//
// A Boundary does three things, in this order:
//
//  1. removes secrets: the exact API key it was built with (also in its
//     JSON- and URL-escaped spellings) and any token shaped like a key or a
//     credential (sk-…, Bearer …, x-api-key: …, ?key=…, AIza…, AKIA…);
//  2. escapes control characters, so a value can never move an operator's
//     cursor, clear a screen or forge a log line;
//  3. bounds the length, on a UTF-8 boundary, marking a cut with "…".
//
// Redaction runs before the cut, and the cut never leaves the prefix of a
// secret that the patterns only missed because it was cut (see bound).
//
// The checks are pure string functions: the classifier may bound its own
// output with them without any I/O.
package redact
