// Package enqueue reads a batch's records (JSONL) and queues them: the
// batch, its records and one River job per record (jobargs.Args) in one
// transaction, so that either the whole batch is queued or nothing is. It
// also estimates what an input would send without writing anything
// (EstimateJSONL), and holds the rules for batch and record ids.
package enqueue
