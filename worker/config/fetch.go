package config

import "time"

// Bounds of Key.FetchCooldown: River's own minimum, and its poll interval
// (a cooldown longer than the poll would be the poll).
const (
	FetchCooldownMin = time.Millisecond
	FetchCooldownMax = time.Second
)

// fetchCooldownBase is the cooldown of a key with concurrency 1: River's
// default. Higher concurrency divides it, down to fetchCooldownFloor.
const (
	fetchCooldownBase  = 100 * time.Millisecond
	fetchCooldownFloor = 2 * time.Millisecond
)

// FetchCooldownFor is Key.FetchCooldown's default for a key with the given
// concurrency: River's 100 ms divided by the concurrency, no less than
// 2 ms. With one fetch every cooldown a process can start up to
// concurrency jobs per cooldown, concurrency²×10 a second: 640 at 8, 2,560
// at 16, so a job that takes a few milliseconds (a fast provider) finds the
// next one fetched already, while a key of concurrency 1 polls as River
// does by default.
func FetchCooldownFor(concurrency int) time.Duration {
	if concurrency < 1 {
		concurrency = 1
	}
	return max(fetchCooldownBase/time.Duration(concurrency), fetchCooldownFloor)
}
