package decide

import "time"

// BatchRequeueWait is how soon a batch line that was answered with a
// failure worth another try (transient, throttled) is written again for
// the next provider batch: the batch itself is the wait.
const BatchRequeueWait = time.Second

// ForBatchLine is After's reaction for a batch line: what waits for a
// synchronous call (a transient failure's backoff, a throttle, a storm) is
// the next provider batch here, so the job parks briefly (no snooze of its
// own, the key not paused) and its next run writes the new line.
func ForBatchLine(rx Reaction) Reaction {
	switch rx.Kind {
	case ReactRetry, ReactSnooze, ReactPauseKey, ReactStorm:
		rx.Kind, rx.After = ReactPark, BatchRequeueWait
	}
	return rx
}
