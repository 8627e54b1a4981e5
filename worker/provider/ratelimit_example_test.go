package provider_test

import (
	"fmt"
	"time"

	"github.com/triage-dev/triage/worker/provider"
)

func ExampleParseRateLimit() {
	now := time.Date(2025, 1, 15, 14, 23, 0, 0, time.UTC)
	rl := provider.ParseRateLimit("anthropic", map[string]string{
		"anthropic-ratelimit-requests-limit":     "4000",
		"anthropic-ratelimit-requests-remaining": "3201",
		"anthropic-ratelimit-requests-reset":     "2025-01-15T14:24:00Z",
	}, now)
	fmt.Println(rl.Requests.Limit, rl.Requests.Remaining, rl.Requests.Reset, rl.Requests.PerSecond())
	// Output: 4000 3201 1m0s 66.66666666666667
}
