package config

import (
	"fmt"
	"time"
)

// Retention is the [retention] table: how long the ledger keeps the rows of
// finished work. A background service of `triage work` prunes older rows
// (one process of the fleet at a time, in small transactions). Rows an
// unsettled batch still needs are never pruned, whatever their age.
type Retention struct {
	// Age is how long finished attempts, alerts and collected provider
	// batches (with their lines) are kept. Default RetentionAgeDefault
	// (30 days). "30d" and Go durations ("720h") are accepted.
	Age time.Duration
	// DeadLetterAge is how long a dead letter is kept after it was
	// requeued. A dead letter never requeued is kept as long as its batch
	// (it is the operator's to-do list). Default RetentionDeadLetterAgeDefault
	// (90 days).
	DeadLetterAge time.Duration
	// Interval is how often the service runs. Default
	// RetentionIntervalDefault (1 hour).
	Interval time.Duration
	// Off turns pruning off: everything is kept. Default false.
	Off bool
}

// Retention defaults.
const (
	RetentionAgeDefault           = 30 * 24 * time.Hour
	RetentionDeadLetterAgeDefault = 90 * 24 * time.Hour
	RetentionIntervalDefault      = time.Hour
)

// rawRetention mirrors [retention] in the file.
type rawRetention struct {
	Age           string `toml:"age"`
	DeadLetterAge string `toml:"dead_letter_age"`
	Interval      string `toml:"interval"`
	Off           bool   `toml:"off"`
}

func (r rawRetention) retention() (Retention, error) {
	out := Retention{Off: r.Off}
	for _, f := range []struct {
		name, raw string
		dst       *time.Duration
	}{
		{"age", r.Age, &out.Age},
		{"dead_letter_age", r.DeadLetterAge, &out.DeadLetterAge},
		{"interval", r.Interval, &out.Interval},
	} {
		d, err := parseTTL(f.raw)
		if err != nil {
			return Retention{}, fmt.Errorf("retention: %s %q: %w", f.name, f.raw, err)
		}
		if f.raw != "" && d <= 0 {
			return Retention{}, fmt.Errorf("retention: %s %q: must be positive (leave it out for the default, or set off = true to keep everything)", f.name, f.raw)
		}
		*f.dst = d
	}
	return out, nil
}

func (r *Retention) defaults() {
	if r.Age == 0 {
		r.Age = RetentionAgeDefault
	}
	if r.DeadLetterAge == 0 {
		r.DeadLetterAge = RetentionDeadLetterAgeDefault
	}
	if r.Interval == 0 {
		r.Interval = RetentionIntervalDefault
	}
}

// minRetentionAge keeps a month of mornings after from being set away by
// mistake ("30" read as 30 seconds is refused by the duration form; "1h"
// is allowed but must be meant).
const minRetentionAge = time.Hour

func (r *Retention) validate(v *validator) {
	if r.Age < minRetentionAge {
		v.addf("retention", "age must be at least %s, got %s", minRetentionAge, r.Age)
	}
	if r.DeadLetterAge < minRetentionAge {
		v.addf("retention", "dead_letter_age must be at least %s, got %s", minRetentionAge, r.DeadLetterAge)
	}
	if r.Interval < time.Minute {
		v.addf("retention", "interval must be at least 1m, got %s", r.Interval)
	}
}
