// Package operator is what a person running triage sees and does, in one
// place for every front end: the views of batches, dead letters and keys in
// the JSON shapes of the CLI's --json output (a contract), and the two
// actions, requeueing dead letters and resuming a key by hand.
//
// `triage status`, `triage dlq`, `triage keys` and the web pages of
// worker/console all call these functions, so a page and a command can never
// disagree about what a record's state is or what a requeue does.
package operator
