// Package jobargs is the contract of a triage job: the River kind and the
// args a record's job carries, and how many River attempts it has. The
// enqueuer writes jobs of this shape and the worker runs them.
package jobargs

import (
	"encoding/json"

	"github.com/riverqueue/river"

	"github.com/triage-dev/triage/worker/config"
)

// Kind is the River job kind of a triage call.
const Kind = "triage_call"

// Args is one record's job. The record itself travels with the job so a
// worker needs no extra read to render the request.
type Args struct {
	Batch    string          `json:"batch"`
	Pipeline string          `json:"pipeline"`
	RecordID string          `json:"record_id"`
	Record   json.RawMessage `json:"record"`
	// NoCache: answer with a fresh call even when the pipeline's response
	// cache holds an answer (`--no-cache`). It travels with the job, so a
	// job snoozed or retried keeps asking for a fresh answer.
	NoCache bool `json:"no_cache,omitempty"`

	// Model is the fallback model the job was moved to ("": the
	// pipeline's own). The request on it has its own idempotency key, so
	// its calls count against max_attempts afresh.
	Model string `json:"model,omitempty"`
}

// Kind implements river.JobArgs.
func (Args) Kind() string { return Kind }

var _ river.JobArgs = Args{}

// AttemptHeadroom is how many River attempts a job has beyond its
// pipeline's max_attempts: see RiverMaxAttempts.
const AttemptHeadroom = 3

// RiverMaxAttempts is the River max_attempts of a pipeline's jobs: the
// pipeline's max_attempts plus AttemptHeadroom. The worker itself
// dead-letters a job at the pipeline's limit; the headroom only absorbs runs
// that failed for the worker's own reasons, so River never discards a job
// (which would leave its record neither completed nor dead-lettered).
func RiverMaxAttempts(p *config.Pipeline) int { return p.MaxAttempts + AttemptHeadroom }
