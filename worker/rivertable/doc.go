// Package rivertable names River's tables for the few statements triage runs
// on them directly: the sweep of jobs River or a human finished without an
// outcome, the count of jobs left, waking parked jobs, moving a probe job to
// its queue. River's own API has no bulk form of these.
//
// Every such statement takes its table name from here, so that River in a
// schema of its own (River's Config.Schema, worker.Options.Schema) is reached
// wherever triage's tables are.
package rivertable
