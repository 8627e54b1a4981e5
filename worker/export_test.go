package worker

import "github.com/triage-dev/triage/worker/keys"

// PacerOf is key's pacer in this process, for tests that hold its pace.
func (r *Runtime) PacerOf(key string) *keys.Pacer {
	if k := r.keys[key]; k != nil {
		return k.pacer
	}
	return nil
}
