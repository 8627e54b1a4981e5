package decide

import (
	"cmp"
	"fmt"
	"math"
	"time"
)

// RetryBudget shapes the fleet retry budget of a key: a retry may go while
// the key's open retries (not succeeded) over the last Window stay under
// its retry_budget share of the first calls over that Window, or under
// Floor, however few first calls there were. The worker checks it before a
// retry; `triage keys`, the web window and /metrics show it with the same
// value the worker runs with.
type RetryBudget struct {
	// Window is the sliding window the calls are counted over.
	Window time.Duration
	// Floor is the retries allowed however few first calls there were, so
	// that a quiet key can retry at all.
	Floor int
}

// The retry budget's shape unless a worker is given another
// (worker.Options.RetryWindow, RetryFloor).
const (
	RetryWindowDefault = time.Minute
	RetryFloorDefault  = 10
)

// RetryBudgetDefault is RetryWindowDefault and RetryFloorDefault.
var RetryBudgetDefault = RetryBudget{Window: RetryWindowDefault, Floor: RetryFloorDefault}

// WithDefaults returns b with its zero fields filled (RetryWindowDefault,
// RetryFloorDefault): the one place the retry budget's defaults are
// resolved, for the worker (worker.Options), /metrics and the web window
// alike. A negative field is left for Validate to refuse.
func (b RetryBudget) WithDefaults() RetryBudget {
	b.Window = cmp.Or(b.Window, RetryWindowDefault)
	b.Floor = cmp.Or(b.Floor, RetryFloorDefault)
	return b
}

// Validate refuses a negative Window or Floor, naming it: a mistake, not
// the default.
func (b RetryBudget) Validate() error {
	if b.Window < 0 {
		return fmt.Errorf("RetryBudget.Window must not be negative, got %s (0 takes the default)", b.Window)
	}
	if b.Floor < 0 {
		return fmt.Errorf("RetryBudget.Floor must not be negative, got %d (0 takes the default)", b.Floor)
	}
	return nil
}

// Since is the start of the window that ends at now.
func (b RetryBudget) Since(now time.Time) time.Time { return now.Add(-b.Window) }

// Allowed is how many open retries a key whose retry_budget is share may
// have over the window, with firstCalls first calls in it: share of them,
// rounded up, but at least Floor; none at all when share is 0 (transient
// failures are then not retried).
func (b RetryBudget) Allowed(share float64, firstCalls int) int {
	if share <= 0 {
		return 0
	}
	return int(math.Ceil(max(float64(b.Floor), share*float64(firstCalls))))
}

// Spent: openRetries reached Allowed; further retries wait.
func (b RetryBudget) Spent(share float64, firstCalls, openRetries int) bool {
	return openRetries >= b.Allowed(share, firstCalls)
}
