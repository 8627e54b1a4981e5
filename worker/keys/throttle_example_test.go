package keys_test

import (
	"fmt"
	"time"

	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/provider"
)

// A 429 says how long to wait; the headers say whether the whole key is
// empty. Only then, and only for a wait worth a fleet-wide pause, is the key
// paused.
func ExampleThrottleScopeFor() {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	empty := provider.ParseRateLimit("openai", map[string]string{
		"x-ratelimit-limit-requests": "1800", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2.5s",
	}, now)
	for _, c := range []struct {
		retryAfter time.Duration
		rl         provider.RateLimit
	}{
		{800 * time.Millisecond, provider.RateLimit{}},
		{30 * time.Second, provider.RateLimit{}},
		{0, empty},
		{50 * time.Millisecond, empty},
	} {
		scope, wait := keys.ThrottleScopeFor(c.retryAfter, c.rl, 0, 0)
		fmt.Println(scope, wait)
	}
	// Output:
	// job 800ms
	// key 30s
	// key 2.5s
	// hold 50ms
}
