package worker

import (
	"time"

	"github.com/triage-dev/triage/worker/config"
)

// Horizon is how long a run of a job may take and how long River waits
// before it takes a running job for dead and hands it to another worker.
type Horizon struct {
	// JobTimeout is River's Config.JobTimeout: the longest call of any key
	// (config.CallMax: its timeout, or its streams' ceiling) plus
	// Options.JobMargin.
	JobTimeout time.Duration
	// RescueAfter is River's Config.RescueStuckJobsAfter.
	RescueAfter time.Duration
}

// fleetHorizon computes the horizon from every key in the configuration,
// not only the keys this process works: River's rescuer runs on whichever
// process is the leader, with the leader's settings, and rescues running
// jobs of every queue. A leader that worked only a fast key would otherwise
// hand a slow key's live call to a second worker, and it would be sent (and
// billed) twice.
func fleetHorizon(cfg *config.Config, margin, rescueAfter time.Duration) Horizon {
	var longest time.Duration
	for i := range cfg.Keys {
		longest = max(longest, cfg.CallMax(&cfg.Keys[i]))
	}
	h := Horizon{JobTimeout: longest + margin, RescueAfter: rescueAfter}
	if h.RescueAfter <= 0 {
		// A crashed worker's running jobs come back after a few timeouts,
		// not River's default hour.
		h.RescueAfter = 2*h.JobTimeout + time.Minute
	}
	h.RescueAfter = max(h.RescueAfter, h.JobTimeout)
	return h
}

// Horizon is the job timeout and rescue horizon this Runtime gave River.
func (r *Runtime) Horizon() Horizon { return r.horizon }

// ConfigHorizon is the horizon a worker process started with cfg and the
// default options gives River (Options.JobMargin and Options.RescueAfter
// unset): how long a job left running by a process that died waits for
// River's rescuer.
func ConfigHorizon(cfg *config.Config) Horizon {
	return fleetHorizon(cfg, JobMarginDefault, 0)
}
