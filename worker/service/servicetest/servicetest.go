// Package servicetest checks what every background service's Config
// promises (worker/service): a complete config is taken, and each required
// field, left out, is refused by its name.
package servicetest

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// RequiredFields checks that newFn takes complete, and refuses it with
// "Config.<name> is required" when any one of the named fields is zeroed.
func RequiredFields[C, S any](t *testing.T, complete C, newFn func(C) (S, error), names ...string) {
	t.Helper()
	if _, err := newFn(complete); err != nil {
		t.Fatalf("a complete config is refused: %v", err)
	}
	for _, name := range names {
		cfg := complete
		f := reflect.ValueOf(&cfg).Elem().FieldByName(name)
		if !f.IsValid() {
			t.Fatalf("Config has no field %s", name)
		}
		f.SetZero()
		_, err := newFn(cfg)
		want := "Config." + name + " is required"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("without %s: got %v, want an error saying %q", name, err, want)
		}
	}
}

// RefusesNonPositive checks that newFn refuses cfg with the named period
// field zero or negative: "Config.<name> must be positive".
func RefusesNonPositive[C, S any](t *testing.T, newFn func(C) (S, error), cfg C, name string) {
	t.Helper()
	for _, d := range []time.Duration{0, -time.Second} {
		reflect.ValueOf(&cfg).Elem().FieldByName(name).Set(reflect.ValueOf(d))
		Refused(t, newFn, cfg, "Config."+name+" must be positive")
	}
}

// Refused checks that newFn refuses cfg with an error that says want.
func Refused[C, S any](t *testing.T, newFn func(C) (S, error), cfg C, want string) {
	t.Helper()
	if _, err := newFn(cfg); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want an error saying %q", err, want)
	}
}
