package testclock_test

import (
	"fmt"
	"time"

	"github.com/triage-dev/triage/worker/testclock"
)

func Example() {
	c := testclock.New(time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC))
	c.Advance(90 * time.Second)
	c.Set(c.Now().Add(-time.Hour)) // ignored: a clock does not go back
	fmt.Println(c.Now().Format("15:04:05"))
	// Output: 02:01:30
}
