// Package service is what the worker's background services share
// (worker/fallbackmove, worker/spendwatch, worker/retention, worker/sweep,
// worker/leftresponses): the loop that runs a pass now and then every
// period until stopped, and the check of a Config's required fields.
package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/triage-dev/triage/worker/decide"
)

// Loop runs a service's passes in a goroutine of its own; the zero Loop is
// ready to Start. Start and Stop are called by one goroutine.
type Loop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs pass now and then every period, jittered between lo and hi
// times it (decide.Jitter), until Stop. The passes' context keeps ctx's
// values but not its end: Stop ends them.
func (l *Loop) Start(ctx context.Context, period time.Duration, lo, hi float64, pass func(ctx context.Context)) {
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		for {
			pass(ctx)
			t := time.NewTimer(decide.Jitter(period, lo, hi))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the passes and waits for the one under way; without Start it
// does nothing.
func (l *Loop) Stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
}

// Config is a service's Config: WithDefaults fills its zero optional
// fields, Validate refuses what no default can stand for, naming the
// field.
type Config[C any] interface {
	WithDefaults() C
	Validate() error
}

// New fills cfg's defaults, validates it and builds the service from it
// with build, or returns Validate's error: every service's New.
func New[C Config[C], S any](cfg C, build func(C) *S) (*S, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return build(cfg), nil
}

// Field is one required field of a Config: its name, and whether it is
// missing.
type Field struct {
	Name    string
	Missing bool
}

// Required is the error naming the first missing field, as
// "pkg: Config.Name is required", or nil.
func Required(pkg string, fields ...Field) error {
	for _, f := range fields {
		if f.Missing {
			return errors.New(pkg + ": Config." + f.Name + " is required")
		}
	}
	return nil
}

// Positive is the error naming a period field that must be positive, as
// "pkg: Config.Name must be positive, got d", or nil.
func Positive(pkg, name string, d time.Duration) error {
	if d > 0 {
		return nil
	}
	return fmt.Errorf("%s: Config.%s must be positive, got %v", pkg, name, d)
}

// NilAt is the error naming the nil element at i of a list field, as
// "pkg: Config.Name[i] is nil", or nil when i is negative (none is nil:
// i is what slices.Index or slices.IndexFunc found).
func NilAt(pkg, name string, i int) error {
	if i < 0 {
		return nil
	}
	return fmt.Errorf("%s: Config.%s[%d] is nil", pkg, name, i)
}

// Signal sends v on ch without blocking (a service's test signal); a nil
// ch, or one nobody is ready to read and whose buffer is full, drops it.
func Signal[T any](ch chan T, v T) {
	if ch == nil {
		return
	}
	select {
	case ch <- v:
	default:
	}
}
