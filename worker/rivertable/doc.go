// Package rivertable owns every statement triage runs on River's tables
// (river_job, river_queue). The writes: waking snoozed jobs (a batch's, a
// queue's, named ones, those of provider-batch lines), cancelling a
// batch's queued jobs, deleting its finished ones, moving a job between
// queues (a probe, a fallback), creating a paused queue's row, marking
// jobs, and completing a group's jobs in the batch that writes their
// answers (River's JobCompleteTx takes one job and a round trip of its
// own); River's own API has no bulk form of these. The reads: the jobs
// left to a process, a batch's live and running jobs, the fallback mover's
// queued jobs, the sweep's ended jobs and stuck records, and those the key
// supervisor makes in its own transactions (a queue's pause, the next job
// to send a probe, locked). No other package runs a statement on River's
// tables (ledger's TestOnlyTheOwnersRunStatements).
//
// Every statement on River's tables takes its table name from here (Job,
// Queue), so that River in a schema of its own (River's Config.Schema,
// worker.Options.Schema) is reached wherever triage's tables are.
package rivertable
