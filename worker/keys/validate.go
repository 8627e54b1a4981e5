package keys

import (
	"fmt"
	"time"
)

// The configs of this package are checked River's way: Validate refuses a
// value no default can stand for (a negative wait or count), naming the
// field, and WithDefaults fills the zero fields, the one place each
// config's defaults are resolved. The constructors (NewStore, NewPacer,
// NewPacers, NewSupervisor, NewAlerter, Store.NewGate) return Validate's
// error for a config it refuses, as river.NewClient does; DefaultStore,
// with nothing to refuse, returns none. Settings a person writes reach
// them through config.Validate and worker.New, which refuse bad values
// with their names first.

// setting is one field of a config, for notNegative.
type setting struct {
	name string
	v    any // time.Duration, int or float64
}

// notNegative returns an error naming the first negative setting of cfg.
func notNegative(cfg string, settings ...setting) error {
	for _, s := range settings {
		neg := false
		switch v := s.v.(type) {
		case time.Duration:
			neg = v < 0
		case int:
			neg = v < 0
		case float64:
			neg = v < 0
		}
		if neg {
			return fmt.Errorf("keys: %s.%s must not be negative, got %v (0 takes the default)", cfg, s.name, s.v)
		}
	}
	return nil
}
