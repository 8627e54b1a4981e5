package worker

import (
	"time"

	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
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
// billed) twice. rescueAfter is Options.RescueAfter with its default
// resolved (Options.WithDefaults); it is never shorter than the job
// timeout.
func fleetHorizon(cfg *config.Config, margin, rescueAfter time.Duration) Horizon {
	h := Horizon{JobTimeout: fleetJobTimeout(cfg, margin)}
	h.RescueAfter = max(rescueAfter, h.JobTimeout)
	return h
}

// fleetJobTimeout is River's job timeout for cfg: the longest call of any
// key in the configuration (config.CallMax) plus margin.
func fleetJobTimeout(cfg *config.Config, margin time.Duration) time.Duration {
	var longest time.Duration
	for i := range cfg.Keys {
		longest = max(longest, cfg.CallMax(&cfg.Keys[i]))
	}
	return longest + margin
}

// rescueAfterDefault is Options.RescueAfter's default, resolved in
// Options.WithDefaults (the one place): twice the fleet's job timeout plus
// a minute, so a crashed worker's running jobs come back after a few
// timeouts, not River's default hour.
func rescueAfterDefault(cfg *config.Config, margin time.Duration) time.Duration {
	return 2*fleetJobTimeout(cfg, margin) + time.Minute
}

// probeLeaseDefault is Options.ProbeLease's default, resolved in
// Options.WithDefaults (the one place): keys' default, raised to twice the
// longest call of the keys this process works plus margin, so a probe's
// claim outlives the probe's run. A name the configuration does not have
// counts for nothing here (New refuses it).
func probeLeaseDefault(cfg *config.Config, names []string, margin time.Duration) time.Duration {
	var longest time.Duration
	for _, name := range names {
		if k, err := cfg.Key(name); err == nil {
			longest = max(longest, cfg.CallMax(k))
		}
	}
	return max(keys.ProbeLeaseDefault, 2*(longest+margin))
}

// Horizon is the job timeout and rescue horizon this Runtime gave River.
func (r *Runtime) Horizon() Horizon { return r.horizon }

// ConfigHorizon is the horizon a worker process started with cfg and the
// default options gives River (Options.JobMargin and Options.RescueAfter
// unset): how long a job left running by a process that died waits for
// River's rescuer.
func ConfigHorizon(cfg *config.Config) Horizon {
	o := Options{Config: cfg}.WithDefaults()
	return fleetHorizon(cfg, o.JobMargin, o.RescueAfter)
}
