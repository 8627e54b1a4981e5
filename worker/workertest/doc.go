// Package workertest is for tests only: it builds the end-to-end world that
// worker, worker/metrics and cmd/triage tests share, as River's riverdbtest
// and rivertest do for River's users. Nothing outside a _test.go file should
// import it.
//
// A world is a private PostgreSQL schema (ledger/dbtest), a fake provider
// served over HTTP (Provider), a triage.toml with one key pointing at it
// (Config) and, when alerts matter, a Webhook receiver. Records and JSONL
// make input; Eventually and WaitSettled wait on the database with a
// deadline instead of sleeping.
package workertest
